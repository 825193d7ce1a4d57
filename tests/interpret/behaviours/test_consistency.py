"""Consistency: agreement equals a hand count, the permutation null, and the xcorr/consistency commands."""

import json

import numpy as np

from proclab.cli import main as cli
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.behaviours.consistency import group_sums, permutation_test, sign_agreement
from proclab.interpret.workspace.folder import Workspace


def test_agreement_equals_a_hand_count():
    rng = np.random.default_rng(0)
    J, X = rng.normal(size=(3, 5, 5)), rng.normal(size=(3, 5, 5))
    J[0, 0, 0], X[0, 0, 0] = 0.0, -1.0  # a zero counts as non-negative, as the seed's (J >= 0) == (X >= 0)
    all_pairs, strong = sign_agreement(J, X, 0.75)
    for m in range(3):
        same = [(J[m, i, j] >= 0) == (X[m, i, j] >= 0) for i in range(5) for j in range(5)]
        assert all_pairs[m] == sum(same) / 25
        qj, qx = np.quantile(np.abs(J[m]), 0.75), np.quantile(np.abs(X[m]), 0.75)
        picked = [
            (J[m, i, j] >= 0) == (X[m, i, j] >= 0)
            for i in range(5)
            for j in range(5)
            if abs(J[m, i, j]) > qj and abs(X[m, i, j]) > qx
        ]
        assert np.isnan(strong[m]) if not picked else strong[m] == sum(picked) / len(picked)


def test_group_sums():
    x = np.arange(12.0).reshape(6, 2)
    labels = np.array([2, 0, 2, 0, 0, 2])
    np.testing.assert_array_equal(
        group_sums(x, labels, 4)[:3], [[2 + 6 + 8, 3 + 7 + 9], [np.nan, np.nan], [0 + 4 + 10, 1 + 5 + 11]]
    )


def planted(n: int = 60, k: int = 4, seed: int = 0):
    """Two behaviours whose Jacobians and correlations share a sign pattern, opposite between them."""
    rng = np.random.default_rng(seed)
    pattern = np.sign(rng.normal(size=(1, k, k)))
    labels = np.arange(n) % 2
    sign = np.where(labels == 0, 1.0, -1.0)[:, None, None, None]
    J = sign * pattern + rng.normal(size=(n, 1, k, k)) * 1.5
    X = sign * pattern + rng.normal(size=(n, 1, k, k)) * 1.5
    return J, X, labels


def test_permutation_null():
    J, X, labels = planted()
    res = permutation_test(J, X, labels, 2, 300, seed=0)
    assert (res["all"] > 0.9).all() and (res["all_p"] < 0.01).all()
    assert (np.abs(res["all_null_mean"] - 0.5) < 0.1).all()
    # labels that carry no information are the null: not significant
    shuffled = np.random.default_rng(5).permutation(labels)
    res = permutation_test(J, X, shuffled, 2, 300, seed=1)
    assert (res["all_p"] > 0.05).all() and (np.abs(res["all_null_mean"] - 0.5) < 0.1).all()
    # the p-value counts exceedances of the null, by hand with the same permutations
    small = permutation_test(J[:10], X[:10], labels[:10], 2, 20, seed=3)
    rng = np.random.default_rng(3)
    null = [
        sign_agreement(*[np.stack([a[lab == g].sum(0) for g in range(2)]) for a in (J[:10], X[:10])])[0]
        for lab in (rng.permutation(labels[:10]) for _ in range(20))
    ]
    np.testing.assert_allclose(small["all_p"], (1 + (np.array(null) >= small["all"][None]).sum(0)) / 21)
    np.testing.assert_allclose(small["all_null_mean"], np.mean(null, 0))


def test_xcorr_and_consistency_commands(samples, tmp_path):
    out = tmp_path / "analysis"
    out.mkdir()
    ws = Workspace.open(out)
    ws.require_inputs(activation="state_out/core.0.h", samples=samples)
    x = np.random.default_rng(0).normal(size=(300, 16))
    Basis.fit(x, BasisConfig(n_ics=3), {"activation": "state_out/core.0.h"}).save(ws.basis_path)
    ws.record_command("hidden", {}, [], 0.0)
    cli(
        [
            "analyze",
            "behaviours",
            "--out",
            str(out),
            "--clusters",
            "2",
            "--pcs",
            "4",
            "--perplexity",
            "1",
            "--lags",
            "1",
            "2",
            "--videos",
            "1",
            "--no-stability",
        ]
    )
    cli(["analyze", "xcorr", "--out", str(out), "--step", "3", "--noise", "0", "--device", "cpu"])
    x = np.load(out / "xcorr" / "xcorr.npz")
    assert x["X"].shape == (3, 6, 3, 3) and x["cosine"].shape == (3, 3)
    j = np.load(out / "xcorr" / "xcaus.npz")
    assert j["env_grads"].shape == (3, 4, 3, 3) and j["no_env_grads"].shape == (3, 4, 3, 3)
    np.testing.assert_allclose(j["env_grads"][-1, 0], np.eye(3), atol=1e-4)  # lag 0: dIC_j / dIC_i = delta
    cli(["analyze", "consistency", "--out", str(out), "--permutations", "20"])
    summary = json.loads((out / "consistency" / "summary.json").read_text())
    assert summary["lags"] == [1, 2, 3] and set(summary["settings"]) == {"env_grads", "no_env_grads"}
    res = summary["settings"]["env_grads"]
    sizes = np.bincount(np.load(out / "behaviours" / "labels.npz")["labels"], minlength=2)
    assert np.array(res["all"]).shape == (2, 3)
    for g in range(2):  # an empty behaviour has no statistics
        assert all((p is None) if sizes[g] == 0 else 0 < p <= 1 for p in res["all_p"][g])
    assert list((out / "consistency").glob("triptych_env_grads_behaviour_*.png"))
