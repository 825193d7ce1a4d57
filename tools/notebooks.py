"""The documentation's notebooks (docs/notebooks/*.ipynb): run them top to bottom, or strip their outputs.

    python tools/notebooks.py run [NOTEBOOK ...] [--out DIR] [--jobs N]   # --out keeps executed copies
    python tools/notebooks.py strip [NOTEBOOK ...]            # before a commit: no outputs, no counts

The site's build (``make docs``) executes every notebook too, with mkdocs-jupyter, and renders the outputs;
``run`` executes them without building the site, with nbclient, in a ``python3`` kernel (the Makefile points
``JUPYTER_PATH`` at the venv's kernel, which runs the interpreter that starts it), prints each notebook's wall
time and fails at the first cell that raises; ``--jobs N`` runs N notebooks at once, each in its own kernel
(``make docs`` runs them two at a time on two cores into ``build/notebooks`` and renders those copies:
tools/docs_hooks.py). Notebooks are committed without outputs
(``tests/test_notebooks.py`` checks it): ``strip`` clears them.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
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
    """Execute ``path`` in a fresh kernel; returns its wall time in seconds. The executed copy goes to
    ``out/<name>`` (written whole, then renamed: a failed run leaves no copy that looks executed)."""
    nb = nbformat.read(path, as_version=4)
    start = time.time()
    NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3").execute()
    seconds = time.time() - start
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        partial = out / f".{path.name}.partial"
        nbformat.write(nb, partial)
        partial.replace(out / path.name)
    return seconds


def _run_one(path: Path, out: Path | None) -> tuple[Path, float | str]:
    """:func:`run` in a worker process: its seconds, or the error of the cell that raised."""
    try:
        return path, run(path, out)
    except CellExecutionError as err:
        return path, f"a cell raised\n{err}"


def run_all(paths: list[Path], out: Path | None, jobs: int) -> list[str]:
    """Execute ``paths``, ``jobs`` at a time (each in its own kernel), printing each one's wall time as it
    ends; returns the failures, one message each."""
    if out is not None:
        for path in paths:  # an executed copy of an earlier run must not outlive a failure of this one
            (out / path.name).unlink(missing_ok=True)
    failures = []
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        for path, result in pool.map(_run_one, paths, [out] * len(paths)):
            if isinstance(result, str):
                failures.append(f"{path}: {result}")
                print(f"{path}: FAILED", flush=True)
            else:
                print(f"{path}: ran in {result:.0f} s", flush=True)
    return failures


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
    parser.add_argument("--jobs", type=int, default=1, help="run: notebooks executed at once (default 1)")
    args = parser.parse_args()
    paths = notebooks(args.notebooks)
    if args.action == "strip":
        for path in paths:
            print(f"{path}: {'stripped' if strip(path) else 'already without outputs'}")
        return
    start = time.time()
    failures = run_all(paths, args.out, args.jobs)
    print(f"{len(paths)} notebooks in {time.time() - start:.0f} s with {args.jobs} at a time")
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
