"""The atlas of a planted agent whose directions have known triggers, tracked quantities, lags and effects
(tests/planted.py, AtlasAgent): every card must recover them, and the null directions show no effect."""

import numpy as np
import pytest

from planted import ATLAS_UNITS, KEY, AtlasAgent, Corridor, record_store, unit_basis
from proclab.interpret.atlas.build import AtlasInputs, AtlasSettings, build_atlas
from proclab.interpret.atlas.episodes import StoreEpisodes
from proclab.interpret.bases.coordinates import LinearCoordinates
from proclab.interpret.interventions.arms import Recorded
from proclab.interpret.sweep.grid import SweepSettings, sweep
from proclab.run.runtime import make_runtime
from proclab.store import EpisodeStore

GATE, DRIVE, POSITION, STYLE, ECHO, CUE, DELAY1, DELAY2, JUMP = range(len(ATLAS_UNITS))
NULL = (POSITION, ECHO)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("planted-atlas")
    agent = AtlasAgent()
    x = record_store(root / "DATA", agent, range(1000, 1200))
    store = EpisodeStore(root / "DATA")
    coords = LinearCoordinates(unit_basis(len(ATLAS_UNITS)), "ica")
    rt = make_runtime("cpu", "fp32", 1)
    args = SweepSettings(levels=60, rows=128, permutations=2000, bootstrap=500)
    rec = Recorded(x, np.zeros(len(ATLAS_UNITS)))
    summary, _, _ = sweep(
        agent, coords, KEY, rec, Corridor(128), np.arange(2000, 2060), list(range(9)), args, rt
    )
    settings = AtlasSettings(
        bootstrap=300, saliency_moments=6, noise=0, predict_steps=600, random_directions=8
    )
    recorded = StoreEpisodes(store, np.arange(store.num_episodes))
    inp = AtlasInputs(recorded, x, coords, agent, "core.0.hook_h", summary, "sweep")
    doc = vars(build_atlas(inp, settings, progress=False))  # the result's fields
    return doc, store, x


def track(card, quantity):
    return next(t for t in card["tracks"] if t["quantity"] == quantity)


def test_top_moments_are_the_frames_that_trigger_the_direction(planted):
    doc, store, x = planted
    lengths = store.episodes["length"]
    ends = np.cumsum(lengths)
    per_episode = [x[e - n : e] for e, n in zip(ends, lengths, strict=True)]
    for m, side in ((CUE, "top"), (DRIVE, "top"), (DRIVE, "bottom")):
        moments = doc["cards"][m]["activation"][side]
        extreme = sorted((ep[:, m].max() if side == "top" else ep[:, m].min()) for ep in per_episode)
        expected = extreme[::-1][: len(moments)] if side == "top" else extreme[: len(moments)]
        assert [mo["value"] for mo in moments] == pytest.approx(expected)
        assert len({mo["episode"] for mo in moments}) == len(moments)
        for mo in moments:  # the frame of the moment shows the cue the unit reads
            frame = store.read(mo["episode"], ["obs"], mo["step"], mo["step"] + 1)["obs"][0]
            pixel = frame[0, 0, 1] if m == CUE else frame[0, 0, 0]
            assert pixel / 255 == pytest.approx(mo["value"], abs=1e-6)
    assert doc["cards"][CUE]["activation"]["top"][0]["strip"].endswith("ic005_top0.png")


def test_each_direction_tracks_its_quantity_at_its_lag(planted):
    doc, _, _ = planted
    cards = doc["cards"]
    for m, lag in ((CUE, 3), (DELAY1, 2), (DELAY2, 1)):
        row = track(cards[m], "action up-right")
        assert row["peak"]["lag"] == lag and row["peak"]["claimed"], (m, row["peak"])
        assert row["peak"]["r"] > 0.5 and abs(row["r0"]) < 0.2
    jump = track(cards[JUMP], "action up-right")
    assert jump["tracked"] and jump["r0"] > 0.5 and not jump["peak"]["claimed"]
    drive = track(cards[DRIVE], "action right")
    assert drive["tracked"] and drive["r0"] > 0.5 and not drive["peak"]["claimed"]
    assert track(cards[POSITION], "progress")["r0"] > 0.8
    assert "leads action up-right by 3 steps" in cards[CUE]["summary"]
    assert cards[JUMP]["summary"].split("; ")[1].startswith("tracks action up-right r = +0.")


def test_causal_effects_are_found_and_null_directions_show_none(planted):
    doc, _, _ = planted
    cards = doc["cards"]
    significant = {c["direction"] for c in cards if c["causes"]["significant"]}
    assert significant == {DRIVE, STYLE, CUE, DELAY1, DELAY2, JUMP}
    for m in NULL:
        for arm in cards[m]["causes"]["arms"]:
            assert not any(v["significant"] for v in arm["metrics"].values()), (m, arm["arm"])
        assert cards[m]["summary"].startswith("no significant on-data effect;")
    gate = cards[GATE]["causes"]
    assert gate["significant_off_data_only"] and not gate["significant"]
    assert {a["arm"] for a in gate["arms"] if a["off_data"]} == {"collapse"}
    assert "only off-data edits changed it" in cards[GATE]["summary"]
    drive = {a["arm"]: a for a in cards[DRIVE]["causes"]["arms"]}
    assert drive["p05"]["metrics"]["level_complete"]["change"] < 0 and not drive["p05"]["off_data"]
    assert drive["p05"]["metrics"]["level_complete"]["significant"]
    cue = {a["arm"]: a for a in cards[CUE]["causes"]["arms"]}
    assert cue["mean"]["metrics"]["tv_distance"]["significant"]  # held at 0.5: it never jumps
    assert not cue["mean"]["metrics"]["level_complete"]["significant"]  # ... and still completes
    assert doc["counts"] == {
        "directions": 9,
        "swept": 9,
        "significant": 6,
        "significant_off_data_only": 1,
        "unstable": None,  # the unit basis is not a fit of these states: a refit cannot be compared
        "significant_and_stable": 6,
    }
    assert doc["stability"]["note"].startswith("not measured: a refit on these states fails")


def test_saliency_looks_at_the_pixel_each_direction_reads(planted):
    doc, _, _ = planted
    for m, pixel in ((CUE, (0, 1)), (DRIVE, (0, 0)), (JUMP, None)):
        grad = np.abs(doc["gradients"].get(m, np.zeros((8, 8))))
        if pixel is None:  # the delay line's end reads no frame of its own step
            assert grad.max() == 0
        else:
            assert np.unravel_index(grad.argmax(), grad.shape) == pixel and grad.max() > 0


def test_gradients_predict_value_changes_only_along_the_direction_the_value_reads(planted):
    doc, _, _ = planted
    points = doc["prediction"]["points"]
    assert {p["direction"] for p in points} == set(range(9))
    for p in points:
        if p["direction"] != CUE:
            assert p["predicted"]["value"] == 0.0
    cue = {p["arm"]: p["predicted"]["value"] for p in points if p["direction"] == CUE}
    assert cue["p95"] > 0 > cue["p05"]
    for key in ("value", "actions"):
        assert doc["prediction"]["pairings"][key]["verdict"].startswith(
            doc["prediction"]["pairings"][key]["what"]
        )


def test_random_directions_baseline_counts_what_the_cards_track(planted):
    """The basis's share is the cards' own count of directions tracking some quantity; the random directions
    mix the planted units, each of which tracks something, so most random directions track something too."""
    doc, _, _ = planted
    tracks = doc["random_baseline"]["tracks"]
    on_cards = sum(any(t["tracked"] for t in c["tracks"]) for c in doc["cards"])
    assert tracks["basis"]["count"] == on_cards and tracks["basis"]["of"] == 9
    assert tracks["random"]["of"] == 8 and tracks["random"]["count"] >= 6
    lo, hi = tracks["random"]["ci95"]
    assert lo <= tracks["random"]["share"] <= hi
