"""mkdocs hooks of the documentation build (``hooks:`` in mkdocs.yml).

Executing the notebooks is most of the build's time, and mkdocs-jupyter executes them one after another.
``make docs`` executes them first, two at a time (``tools/notebooks.py run --jobs 2 --out build/notebooks``),
and names that folder in ``PROCLAB_EXECUTED_NOTEBOOKS``: the site then renders those executed copies instead
of executing each notebook again. A copy older than its notebook, or missing, fails the build, so a page never
shows the outputs of other code. Without the variable (a plain ``mkdocs build`` or ``mkdocs serve``)
mkdocs-jupyter executes every notebook itself.
"""

from __future__ import annotations

import os
from pathlib import Path

from mkdocs.exceptions import PluginError

VARIABLE = "PROCLAB_EXECUTED_NOTEBOOKS"


def _executed() -> Path | None:
    folder = os.environ.get(VARIABLE)
    return Path(folder).resolve() if folder else None


def on_config(config):
    if _executed() is not None:
        config.plugins["mkdocs-jupyter"].config["execute"] = False
    return config


def on_files(files, config):
    folder = _executed()
    if folder is None:
        return files
    for page in files:
        if not (page.src_uri.startswith("notebooks/") and page.src_uri.endswith(".ipynb")):
            continue
        source = Path(page.abs_src_path)
        copy = folder / source.name
        if not copy.is_file():
            raise PluginError(f"{VARIABLE}: no executed copy of {page.src_uri} in {folder}")
        if copy.stat().st_mtime < source.stat().st_mtime:
            raise PluginError(f"{VARIABLE}: {copy} is older than {page.src_uri}; execute the notebooks again")
        page.abs_src_path = str(copy)
        if hasattr(page, "file"):  # mkdocs-jupyter's wrapper: the file inside caches its own path
            page.file.abs_src_path = str(copy)
    return files
