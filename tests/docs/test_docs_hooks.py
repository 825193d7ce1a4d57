"""tools/docs_hooks.py: the site renders the executed copies of the notebooks, never a stale or missing one."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "tools" / "docs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def site(tmp_path: Path):
    """A docs folder with one page and one notebook, as mkdocs lists them."""
    from mkdocs.structure.files import File, Files

    docs = tmp_path / "docs"
    (docs / "notebooks").mkdir(parents=True)
    (docs / "index.md").write_text("# home\n")
    (docs / "notebooks" / "a.ipynb").write_text("{}")
    files = [File(p, str(docs), str(tmp_path / "site"), True) for p in ("index.md", "notebooks/a.ipynb")]
    return docs, Files(files)


def test_the_notebooks_are_read_from_their_executed_copies(tmp_path, monkeypatch):
    docs, files = site(tmp_path)
    executed = tmp_path / "executed"
    executed.mkdir()
    (executed / "a.ipynb").write_text('{"executed": true}')
    monkeypatch.setenv("PROCLAB_EXECUTED_NOTEBOOKS", str(executed))
    hooks().on_files(files, None)
    paths = {f.src_uri: f.abs_src_path for f in files}
    assert paths == {"index.md": str(docs / "index.md"), "notebooks/a.ipynb": str(executed / "a.ipynb")}


def test_mkdocs_jupyters_wrapper_reads_the_copy_too(tmp_path, monkeypatch):
    """mkdocs-jupyter wraps each notebook's file before the hook runs, and the wrapper caches its own path."""
    from mkdocs.structure.files import Files
    from mkdocs_jupyter.plugin import NotebookFile

    _, files = site(tmp_path)
    wrapped = NotebookFile(files.get_file_from_path("notebooks/a.ipynb"), True, str(tmp_path / "site"))
    assert wrapped.abs_src_path.endswith("docs/notebooks/a.ipynb")  # read (and cached) before the hook
    executed = tmp_path / "executed"
    executed.mkdir()
    (executed / "a.ipynb").write_text("{}")
    monkeypatch.setenv("PROCLAB_EXECUTED_NOTEBOOKS", str(executed))
    hooks().on_files(Files([wrapped]), None)
    assert wrapped.abs_src_path == wrapped.file.abs_src_path == str(executed / "a.ipynb")


def test_a_missing_or_stale_copy_fails_the_build(tmp_path, monkeypatch):
    from mkdocs.exceptions import PluginError

    _, files = site(tmp_path)
    executed = tmp_path / "executed"
    executed.mkdir()
    monkeypatch.setenv("PROCLAB_EXECUTED_NOTEBOOKS", str(executed))
    with pytest.raises(PluginError, match=r"no executed copy of notebooks/a\.ipynb"):
        hooks().on_files(files, None)
    copy = executed / "a.ipynb"
    copy.write_text("{}")
    os.utime(copy, (1, 1))  # older than the notebook
    _, files = site(tmp_path / "again")
    with pytest.raises(PluginError, match=r"older than notebooks/a\.ipynb"):
        hooks().on_files(files, None)


def test_without_the_variable_the_build_executes_the_notebooks_itself(tmp_path, monkeypatch):
    docs, files = site(tmp_path)
    monkeypatch.delenv("PROCLAB_EXECUTED_NOTEBOOKS", raising=False)
    hooks().on_files(files, None)
    assert {f.abs_src_path for f in files} == {str(docs / "index.md"), str(docs / "notebooks" / "a.ipynb")}
