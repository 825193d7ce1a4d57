"""Typed results: saved as JSON plus arrays (atomically, never over an existing folder), loaded back by their
fields' types, shown as tables."""

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

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


@dataclass(frozen=True)
class Nested(Result):
    scores: Scores
    per_direction: dict[int, np.ndarray]
    states: torch.Tensor
    truth: dict[str, torch.Tensor]
    interval: float | None
    names: tuple[str, ...]
    where: Path
    best: int | tuple[int, int]


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


def test_load_gives_back_each_field_as_its_type_says(tmp_path):
    r = Nested(
        example(), {3: np.ones(2, np.float32)}, torch.arange(6).reshape(2, 3), {"x": torch.zeros(2, dtype=torch.bool)},
        None, ("a", "b"), Path("/tmp/x"), (1, 2),
    )  # fmt: skip
    loaded = Nested.load(r.save(tmp_path / "r"))
    assert loaded.scores.ci == (0.25, 0.75) and loaded.scores.name == "probe"
    np.testing.assert_array_equal(loaded.scores.per_level, r.scores.per_level)
    assert list(loaded.scores.nested) == ["bad", "n"] and math.isnan(loaded.scores.nested["bad"])
    assert list(loaded.per_direction) == [3] and loaded.per_direction[3].dtype == np.float32
    assert torch.equal(loaded.states, r.states) and loaded.truth["x"].dtype == torch.bool
    assert (loaded.interval, loaded.names, loaded.where, loaded.best) == (
        None,
        ("a", "b"),
        Path("/tmp/x"),
        (1, 2),
    )


def test_non_finite_floats_are_null_in_json_and_come_back_as_they_were(tmp_path):
    folder = Scores("x", math.inf, (0.0, math.nan), np.zeros(1), {"low": -math.inf, "n": [math.nan]}).save(
        tmp_path / "r"
    )
    assert json.loads((folder / "result.json").read_text())["nested"] == {"low": None, "n": [None]}
    loaded = Scores.load(folder)
    assert loaded.score == math.inf and loaded.ci[0] == 0.0 and math.isnan(loaded.ci[1])
    assert loaded.nested["low"] == -math.inf and math.isnan(loaded.nested["n"][0])
    content = json.loads((folder / "result.json").read_text())
    (tmp_path / "by hand").mkdir()
    (tmp_path / "by hand" / "result.json").write_text(json.dumps(content | {"per_level": [0.0]}))
    assert math.isnan(Scores.load(tmp_path / "by hand").score)  # a null without its value: NaN for a float


def test_arrays_of_python_objects_are_refused_not_pickled(tmp_path):
    with pytest.raises(ProclabError, match="per_level hold Python objects"):
        Scores("x", 0.0, (0.0, 1.0), np.array(["a", None], object), {}).save(tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_a_folder_of_another_result_or_none_is_refused(tmp_path):
    folder = example().save(tmp_path / "r")
    with pytest.raises(ProclabError, match="holds a Scores result, not a Curve"):
        Curve.load(folder)
    with pytest.raises(ProclabError, match="missing"):
        Scores.load(tmp_path / "nothing")
