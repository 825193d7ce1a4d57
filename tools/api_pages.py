"""The documentation site's API reference, generated at build time (mkdocs-gen-files runs this).

One page per top-level package of proclab (and one for the top-level modules), listing every
public module found by walking ``src/proclab`` when the site is built. Nothing names a module by
hand, so moving or adding modules never breaks the reference; mkdocstrings renders each module
from its source (docstrings, signatures) without importing it.

These are the internals. The public API has its own page, docs/api.md: what it renders (its ``:::``
entries) is left out here, so every object has one home and one link target.
"""

from __future__ import annotations

import re
from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "proclab"
API_PAGE = ROOT / "docs" / "api.md"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def public(path: Path) -> bool:
    """Skip private modules (``_procgen``) and their contents; a package's ``__init__`` is its page head."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return not any(p.startswith("_") and p != "__init__" for p in parts) and path.name != "__main__.py"


def pages() -> dict[str, list[str]]:
    """Page name (top-level package, or ``proclab`` for the root modules) -> its modules, in order."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if not public(path):
            continue
        name = module_name(path)
        parts = name.split(".")
        page = parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else "proclab"
        found.setdefault(page, []).append(name)
    return dict(sorted(found.items(), key=lambda item: (item[0] != "proclab", item[0])))


def on_api_page() -> set[str]:
    """What docs/api.md renders: ``module`` or ``module.Name`` targets."""
    return set(re.findall(r"^::: ([\w.]+)", API_PAGE.read_text(), flags=re.M))


def write() -> None:
    public = on_api_page()
    summary = []
    for page, modules in pages().items():
        title = "proclab (top-level modules)" if page == "proclab" else f"proclab.{page}"
        with mkdocs_gen_files.open(f"reference/{page}.md", "w") as f:
            f.write(f"# {title}\n\n")
            for module in modules:
                if module in public:
                    f.write(f"`{module}`: see [the Python API](../api.md).\n\n")
                    continue
                names = sorted(t.rpartition(".")[2] for t in public if t.rpartition(".")[0] == module)
                f.write(f"::: {module}\n")
                if names:  # on the API page; listed there only
                    f.write(f'    options:\n      filters: ["!^_", "!^({"|".join(names)})$"]\n')
                f.write("\n")
        summary.append(f"* [{title}]({page}.md)\n")
    with mkdocs_gen_files.open("reference/SUMMARY.md", "w") as f:
        f.writelines(summary)


write()
