"""Panel folders: the schema, array chunks, extrema and histograms against plain references."""

import json

import jsonschema
import numpy as np
import pytest

from proclab.panel.bundle import extrema, histograms, load_schema, read_array


def test_synthetic_panel_follows_schema_and_chunks_round_trip(tmp_path, make_synthetic_panel):
    panel = make_synthetic_panel(tmp_path / "p", n_samples=23, n_real=2, chunk=10)
    doc = json.loads((panel / "data" / "panel.json").read_text())
    jsonschema.Draft202012Validator(load_schema()).validate(doc)
    for name in ("index.html", "app.js", "style.css", "plotly.min.js"):
        assert (panel / name).is_file()
    assert len(doc["arrays"]["ics"]["files"]) == 3  # 25 samples in chunks of 10
    ics = read_array(panel, doc, "ics")
    assert ics.shape == (25, 10, 16)
    for sample in doc["samples"]:
        for rel in sample["strips"].values():
            assert (panel / "data" / rel).is_file()


def test_schema_rejects_a_broken_document(tmp_path, make_synthetic_panel):
    panel = make_synthetic_panel(tmp_path / "p", n_samples=5, n_real=0)
    doc = json.loads((panel / "data" / "panel.json").read_text())
    validator = jsonschema.Draft202012Validator(load_schema())
    for broken in (
        {**doc, "version": 2},
        {**doc, "samples": [{**doc["samples"][0], "kind": "imagined"}]},
        {**doc, "samples": [{**doc["samples"][0], "strips": {"obs": "../../etc/passwd"}}]},
        {
            **doc,
            "arrays": {**doc["arrays"], "ics": {"shape": [5, 10], "chunk": 1, "files": ["arrays/x.f32"]}},
        },
    ):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(broken)


def test_extrema_match_a_sort_over_pairs():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((300, 4, 3))
    x[7, 2, 1] = np.nan
    lists = extrema(x, fraction=0.02)
    for c in range(3):
        pairs = sorted(
            ((x[i, t, c], i) for i in range(300) for t in range(4) if np.isfinite(x[i, t, c])),
        )
        m = round(len(pairs) * 0.02)
        assert lists[c]["top"] == sorted({i for _, i in pairs[-m:]})
        assert lists[c]["bottom"] == sorted({i for _, i in pairs[:m]})
        mid = (len(pairs) - m) // 2
        assert lists[c]["middle"] == sorted({i for _, i in pairs[mid : mid + m]})
    at_step = extrema(x, [2], fraction=0.02)
    order = np.argsort(x[:, 2, 0])
    assert at_step[0]["top"] == sorted(order[-6:].tolist())


def test_histograms_count_every_finite_value():
    x = np.random.default_rng(2).standard_normal((50, 4, 2))
    x[0, 0, 0] = np.nan
    h = histograms(x, bins=7)
    assert sum(h[0]["counts"]) == 199 and sum(h[1]["counts"]) == 200
    assert h[1]["counts"] == np.histogram(x[..., 1].ravel(), bins=7)[0].tolist()
