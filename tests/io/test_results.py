"""Typed results: saved as JSON plus arrays (atomically, never over an existing folder), shown as tables."""

import json
from dataclasses import dataclass

import numpy as np
import pytest

from proclab.errors import ProclabError
from proclab.io.files import subplots
from proclab.io.results import Result


@dataclass(frozen=True)
class Scores(Result):
    name: str
    score: float
    ci: tuple[float, float]
    per_level: np.ndarray
    nested: dict


@dataclass(frozen=True)
class Curve(Result):
    ys: list

    def plot(self, ax=None):
        fig, ax = subplots()
        ax.plot(self.ys)
        return fig


def example() -> Scores:
    return Scores(
        "probe", 0.5, (0.25, 0.75), np.arange(6.0).reshape(2, 3), {"bad": float("nan"), "n": np.int64(3)}
    )


def test_save_writes_fields_and_arrays_and_refuses_an_existing_folder(tmp_path):
    r = example()
    out = r.save(tmp_path / "r")
    content = json.loads((out / "result.json").read_text())
    assert content["type"] == "Scores" and content["score"] == 0.5 and content["ci"] == [0.25, 0.75]
    assert content["nested"] == {"bad": None, "n": 3}  # non-finite floats are null, numpy scalars numbers
    assert content["per_level"] == {"array": "per_level", "shape": [2, 3], "dtype": "float64"}
    with np.load(out / "arrays.npz") as f:
        np.testing.assert_array_equal(f["per_level"], r.per_level)
    with pytest.raises(ProclabError, match="exists"):
        r.save(out)
    r.save(out, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]  # no temporary left behind


def test_tables_and_dicts():
    r = example()
    assert r.table() == [{"name": "probe", "score": 0.5}]
    assert r.to_dict()["per_level"] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert "probe" in str(r) and "<table>" in r._repr_html_()
    with pytest.raises(ProclabError, match="no plot"):
        r.plot()


def test_a_result_with_a_picture_gives_a_notebook_its_png_beside_its_table():
    formatters = pytest.importorskip("IPython.core.formatters")
    shown, _ = formatters.DisplayFormatter().format(Curve([1.0, 3.0, 2.0]))
    assert shown["image/png"].startswith(b"\x89PNG\r\n\x1a\n") and "<table>" in shown["text/html"]
    assert example()._repr_png_() is None  # no picture: the table alone
    assert "image/png" not in formatters.DisplayFormatter().format(example())[0]
