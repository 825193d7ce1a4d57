"""The public API: every name proclab exports resolves lazily, has a docstring, and is on docs/api.md."""

import re
import subprocess
import sys
from pathlib import Path

import proclab

API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def documented() -> set[str]:
    return set(re.findall(r"^::: ([\w.]+)", API_PAGE.read_text(), flags=re.M))


def exported(namespace, names) -> list[tuple[str, object]]:
    return [(n, getattr(namespace, n)) for n in names if not n.startswith("__")]


def test_every_public_name_has_a_docstring_and_a_place_on_the_api_page():
    page = documented()
    missing, bare = [], []
    for space in (proclab, proclab.analyze, proclab.stats):
        for name, value in exported(space, space.__all__):
            if name in ("analyze", "stats"):
                assert f"proclab.{name}" in page
                continue
            if not (getattr(value, "__doc__", None) or "").strip():
                bare.append(name)
            where = f"{value.__module__}.{value.__qualname__}" if hasattr(value, "__qualname__") else name
            if where not in page:
                missing.append(where)
    assert not bare, f"public names without a docstring: {bare}"
    assert not missing, f"public names missing from docs/api.md: {missing}"


def test_the_api_page_names_only_what_exists():
    for target in documented():
        module, _, attr = target.rpartition(".")
        try:
            __import__(target)  # a module
            continue
        except ImportError:
            pass
        assert hasattr(__import__(module, fromlist=[attr]), attr), target


def test_importing_proclab_loads_nothing_heavy():
    code = "import sys, proclab; print(sorted(m for m in ('torch', 'numpy', 'sklearn') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert set(dir(proclab)) == set(proclab.__all__)
