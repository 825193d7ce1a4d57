"""The documentation's notebooks (docs/notebooks/*.ipynb): run them top to bottom, or strip their outputs.

    python tools/notebooks.py run [NOTEBOOK ...] [--out DIR]   # make notebooks; --out keeps executed copies
    python tools/notebooks.py strip [NOTEBOOK ...]            # before a commit: no outputs, no counts

The site's build (``make docs``) executes every notebook too, with mkdocs-jupyter, and renders the outputs;
``run`` executes them without building the site, with nbclient, in a ``python3`` kernel (the Makefile points
``JUPYTER_PATH`` at the venv's kernel, which runs the interpreter that starts it), prints each notebook's wall
time and stops at the first cell that raises. Notebooks are committed without outputs
(``tests/test_notebooks.py`` checks it): ``strip`` clears them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "docs" / "notebooks"
CELL_TIMEOUT_S = 600


def notebooks(given: list[str]) -> list[Path]:
    return [Path(p) for p in given] or sorted(NOTEBOOKS.glob("*.ipynb"))


def run(path: Path, out: Path | None) -> float:
    """Execute ``path`` in a fresh kernel; returns its wall time in seconds."""
    nb = nbformat.read(path, as_version=4)
    start = time.time()
    NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3").execute()
    seconds = time.time() - start
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, out / path.name)
    return seconds


def strip(path: Path) -> bool:
    """Clear ``path``'s outputs, execution counts and execution metadata; returns whether it changed."""
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None)
    after = nbformat.writes(nb)
    if after != before:
        path.write_text(after)
    return after != before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("run", "strip"))
    parser.add_argument("notebooks", nargs="*", help="default: every docs/notebooks/*.ipynb")
    parser.add_argument("--out", type=Path, help="run: write the executed notebooks here")
    args = parser.parse_args()
    for path in notebooks(args.notebooks):
        if args.action == "strip":
            print(f"{path}: {'stripped' if strip(path) else 'already without outputs'}")
            continue
        try:
            seconds = run(path, args.out)
        except CellExecutionError as err:
            sys.exit(f"{path}: a cell raised\n{err}")
        print(f"{path}: ran in {seconds:.0f} s")


if __name__ == "__main__":
    main()
