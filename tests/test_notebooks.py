"""The documentation's notebooks are committed without outputs: the site's build executes them (mkdocs.yml),
so stored outputs would only be stale copies of what the build shows, and would bloat every diff."""

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "docs" / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert {p.name for p in NOTEBOOKS} >= {"world_model.ipynb", "trex.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_notebook_has_no_outputs_and_no_execution_counts(path):
    notebook = json.loads(path.read_text())
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert code, f"{path.name} has no code cell"
    kept = [
        i for i, cell in enumerate(code) if cell.get("outputs") or cell.get("execution_count") is not None
    ]
    assert not kept, f"{path.name}: code cells {kept} keep outputs; run python tools/notebooks.py strip"
    assert (
        notebook["metadata"]["kernelspec"]["name"] == "python3"
    )  # the kernel make docs and make notebooks run
