"""Typed results: saved as JSON plus arrays (atomically, never over an existing folder), shown as tables."""

import json
from dataclasses import dataclass

import numpy as np
import pytest

from proclab.errors import ProclabError
from proclab.io.results import Result


@dataclass(frozen=True)
class Scores(Result):
    name: str
    score: float
    ci: tuple[float, float]
    per_level: np.ndarray
    nested: dict


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
