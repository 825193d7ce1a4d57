"""proclab draws without touching its user's matplotlib (the backend the user chose stays, pyplot is never
imported), and its figures show themselves in a notebook as PNG."""

import ast
from pathlib import Path

import matplotlib.figure
import numpy as np
import pytest

import proclab
from proclab.interpret.probes.probe import Probes
from proclab.io.files import figure_and_axes, figure_of, subplots
from support import matplotlib_after

PNG = b"\x89PNG\r\n\x1a\n"


def test_subplots_returns_what_plt_subplots_returns_as_a_figure_that_shows_itself():
    fig, ax = subplots(figsize=(3, 2))
    assert isinstance(fig, matplotlib.figure.Figure) and ax.figure is fig
    assert tuple(fig.get_size_inches()) == (3, 2)
    _, grid = subplots(2, 3, squeeze=False, sharex=True)
    assert np.shape(grid) == (2, 3)
    _, row = subplots(1, 2)
    assert np.shape(row) == (2,)
    ax.plot([0, 1])
    assert fig._repr_png_().startswith(PNG)


def test_a_result_drawn_on_axes_of_a_subfigure_gives_the_whole_figure():
    """A result's ``plot(ax)`` returns the figure to save: for axes of a subfigure, its root (a subfigure has
    no ``savefig`` nor ``tight_layout``, which some plots call)."""
    fig = matplotlib.figure.Figure()
    ax = fig.subfigures(1, 2)[0].subplots()
    score = {"score": 0.5, "ci": [0.4, 0.6]}
    probes = Probes("core.0.hook_h", [8], 2, 10, probes={"x": {"metric": "r2", "probe": score}})
    assert figure_of(ax) is fig and probes.plot(ax) is fig
    assert figure_and_axes(ax, (3, 2)) == (fig, ax)
    new, axes = figure_and_axes(None, (3, 2))
    assert axes.figure is new and tuple(new.get_size_inches()) == (3, 2)


def test_ipython_shows_a_figure_as_png_without_pyplot():
    formatters = pytest.importorskip("IPython.core.formatters")
    fig, ax = subplots()
    ax.plot([0, 1])
    shown, _ = formatters.DisplayFormatter().format(fig)
    assert shown["image/png"].startswith(PNG)


DRAWS = """
from proclab.interpret.probes.probe import Probes
from proclab.io.files import save_figure
from proclab.rl.curves import plot_runs

score = {"score": 0.5, "ci": [0.4, 0.6]}
probes = Probes("core.0.hook_h", [8], 2, 10, probes={"x": {"metric": "r2", "probe": score, "constant": score}})
save_figure(probes.plot(), OUT / "probes.png")
run = OUT / "run"
run.mkdir()
(run / "metrics.csv").write_text("step,charts/episodic_return\\n0,1.0\\n8,2.0\\n")
plot_runs([run], OUT / "curves.png")  # proclab plot's figure
"""


def test_drawing_keeps_the_users_backend_and_never_imports_pyplot(tmp_path):
    assert matplotlib_after(DRAWS, tmp_path) == {"backend": "svg", "pyplot": False}
    assert (tmp_path / "probes.png").read_bytes().startswith(PNG)
    assert (tmp_path / "curves.png").read_bytes().startswith(PNG)


def changes_matplotlib(node: ast.AST) -> bool:
    """An import of pyplot, or a call of ``matplotlib.use``."""
    if isinstance(node, ast.Import):
        return any(a.name == "matplotlib.pyplot" for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.module == "matplotlib.pyplot" or (
            node.module == "matplotlib" and any(a.name == "pyplot" for a in node.names)
        )
    return isinstance(node, ast.Call) and ast.unparse(node.func) == "matplotlib.use"


def test_no_library_module_imports_pyplot_or_chooses_a_backend():
    assert changes_matplotlib(ast.parse("import matplotlib.pyplot as plt").body[0])
    assert changes_matplotlib(ast.parse("matplotlib.use('Agg')").body[0].value)
    root = Path(proclab.__file__).parent
    found = [
        f"{path.relative_to(root)}:{node.lineno}"
        for path in sorted(root.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if changes_matplotlib(node)
    ]
    assert found == [], "draw on proclab.io.files.subplots' figures"
