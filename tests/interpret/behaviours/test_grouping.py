"""Behaviours: planted classes are recovered, the saved transform assigns new rollouts, the command's outputs."""

import json

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

import proclab
from proclab.cli import main as cli
from proclab.errors import ProclabError
from proclab.interpret.bases.pca_ica import Basis
from proclab.interpret.behaviours.grouping import BehaviourConfig, BehaviourModel, lagged_features, modal
from proclab.io.results import jsonable
from proclab.store import EpisodeStore, ShardWriter
from proclab.store.schema import STATE_LAYOUT_ATTR
from support import round_trip

CLASSES = 3


def planted(n: int, seed: int, T: int = 10, D: int = 8, H: int = 20):
    """Three behaviours: each class drifts along its own direction in agent and env state."""
    rng = np.random.default_rng(seed)
    truth = np.arange(n) % CLASSES
    drift = np.random.default_rng(99).normal(size=(CLASSES, D + H)) * 0.6
    t = np.arange(T)[None, :, None]
    x = drift[truth][:, None, :] * t + rng.normal(size=(n, T, D + H)) * 0.3
    return x[..., :D].astype(np.float32), x[..., D:].astype(np.float32), truth


def test_lagged_features_by_hand():
    state, env = np.arange(2 * 8 * 1).reshape(2, 8, 1).astype(float), np.zeros((2, 8, 1))
    f = lagged_features(state, env, (2, 4))
    assert f.shape == (2, 4, 6)
    np.testing.assert_array_equal(f[1, 3], [11, 0, 2, 0, 4, 0])  # x_3, x_5 - x_3, x_7 - x_3
    assert modal(np.array([[1, 1, 0], [2, 0, 0]]), 3).tolist() == [1, 0]


def test_planted_behaviours_are_recovered_and_assigned():
    state, env, truth = planted(60, 0)
    config = BehaviourConfig(clusters=CLASSES, pcs=16, perplexity=10)
    model, steps, tsne = BehaviourModel.fit(state, env, config, seed=0)
    labels = modal(steps, CLASSES)
    assert tsne.shape == (60, 4, 3) and steps.shape == (60, 4)
    assert adjusted_rand_score(truth, labels) > 0.9
    again, _ = model.assign(state, env)
    np.testing.assert_array_equal(again, labels)
    new_state, new_env, new_truth = planted(30, 1)
    assert adjusted_rand_score(new_truth, model.assign(new_state, new_env)[0]) > 0.9


def test_saved_transform_round_trips(tmp_path):
    state, env, _ = planted(30, 2)
    model, _, _ = BehaviourModel.fit(
        state, env, BehaviourConfig(clusters=CLASSES, pcs=8, perplexity=5), seed=0
    )
    model.save(tmp_path / "t.npz")
    loaded = BehaviourModel.load(tmp_path / "t.npz")
    assert loaded.config == model.config
    np.testing.assert_array_equal(loaded.assign(state, env)[0], model.assign(state, env)[0])


def planted_store(path, n: int, seed: int):
    """The planted behaviours as a sample store shaped like proclab wm sample's output."""
    state, env, truth = planted(n, seed)
    rng = np.random.default_rng(seed)
    T = state.shape[1]
    with ShardWriter(path, attrs={STATE_LAYOUT_ATTR: {"core.0": [["core.0.h", [state.shape[-1]]]]}}) as w:
        for i in range(n):
            w.append(
                {
                    "obs": rng.integers(0, 255, (T, 3, 64, 64), dtype=np.uint8),
                    "action": np.full(T, truth[i] * 3),
                    "value": np.full(T, float(truth[i]), np.float32),
                    "terminated": np.zeros(T, bool),
                    "env_h": env[i],
                    "state_out/core.0": state[i],
                },
                {"return": float(truth[i]), "state_in0/core.0": np.zeros(state.shape[-1], np.float32)},
            )
    return path, truth


def test_behaviours_command(tmp_path):
    store, truth = planted_store(tmp_path / "SAMPLES", 45, 0)
    out = tmp_path / "analysis"
    cli(
        [
            "analyze",
            "behaviours",
            "--out",
            str(out),
            "--samples",
            str(store),
            "--clusters",
            "3",
            "--pcs",
            "16",
            "--perplexity",
            "10",
            "--videos",
            "2",
        ]
    )
    summary = json.loads((out / "behaviours" / "summary.json").read_text())
    assert len(summary["behaviours"]) == 3 and sum(b["size"] for b in summary["behaviours"]) == 45
    assert summary["stability_ari"] > 0.9
    for b in summary["behaviours"]:  # each behaviour is one planted class: its value, return and action
        assert (
            b["mean_value"] == b["mean_return"]
            and b["action_histogram"][["down-left", "down", "down-right"][int(b["mean_value"])]]
            == b["size"] * 10
        )
    labels = np.load(out / "behaviours" / "labels.npz")["labels"]
    assert adjusted_rand_score(truth, labels) > 0.9
    assert len(list((out / "behaviours" / "videos").glob("*.mp4"))) == 2
    new, new_truth = planted_store(tmp_path / "NEW", 15, 1)
    cli(["analyze", "behaviours", "--out", str(out), "--assign", str(new)])
    assigned = np.load(out / "behaviours" / "assigned_NEW.npz")
    assert adjusted_rand_score(new_truth, assigned["labels"]) > 0.9
    with pytest.raises(SystemExit):
        cli(["analyze", "behaviours", "--out", str(out), "--lags", "20"])


def test_the_function_gives_what_the_command_wrote(tmp_path, sample_store):
    """``analyze behaviours`` on a folder with a basis (distinctive ICs) against the function on the same
    sample store object: the same summary, labels, t-SNE and transform."""
    out = tmp_path / "A"
    SMALL = ["--n-ics", "3", "--clusters", "3", "--nmf", "2", "--perplexity", "10", "--fit-points", "150"]
    cli(["analyze", "hidden", "--data", str(sample_store), "--out", str(out), *SMALL, "--no-plots"])
    cli(["analyze", "behaviours", "--out", str(out), "--samples", str(sample_store), "--clusters", "3",
         "--pcs", "8", "--perplexity", "5", "--ids", "0:30", "--videos", "0"])  # fmt: skip
    settings = proclab.analyze.BehaviourSettings(ids="0:30", clusters=3, pcs=8, perplexity=5.0)
    basis = Basis.load(out / "basis.npz")
    res = proclab.analyze.behaviours(EpisodeStore(sample_store), basis=basis, settings=settings)
    summary = json.loads((out / "behaviours" / "summary.json").read_text())
    summary.pop("seconds")
    assert jsonable(summary) == jsonable(res.summary())  # (NaN as None on both sides: no return recorded)
    assert all("distinctive_ics" in b for b in res.behaviours if b["size"])
    labels = np.load(out / "behaviours" / "labels.npz")
    for k in ("ids", "labels", "step_labels", "tsne"):
        np.testing.assert_array_equal(labels[k], getattr(res, k), err_msg=k)
    written = BehaviourModel.load(out / "behaviours" / "transform.npz")
    assert written.config == res.model.config and set(written.a) == set(res.model.a)
    for k, v in written.a.items():
        np.testing.assert_array_equal(v, res.model.a[k], err_msg=k)
    assert sum(r["size"] for r in res.table()) == 30 and len(res.plot().axes) >= 1
    round_trip(res, tmp_path / "saved")  # the transform too, from transform.npz
    assert (tmp_path / "saved" / "transform.npz").is_file()
    with pytest.raises(ProclabError, match=r"hook:torso.hook_fc of .* is replayed by an agent: pass agent="):
        proclab.analyze.behaviours(EpisodeStore(sample_store), "torso.hook_fc", settings=settings)
