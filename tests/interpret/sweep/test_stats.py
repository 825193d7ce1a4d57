"""The sweep's statistics against slow, obvious references: permutation p-values from explicit swaps,
bootstrap replicates and corrected intervals from explicit resamples, and the correction (tested in
tests/stats) applied within each arm and metric."""

import numpy as np
import pytest

from proclab.interpret.interventions.batched_play import Outcomes
from proclab.interpret.stats.paired import frequency_boot, frequency_p, mean_boot, mean_p
from proclab.interpret.sweep.stats import compare
from proclab.stats.bootstrap import resamples, weights
from proclab.stats.corrections import adjust, interval_level
from proclab.stats.permutation import sign_flips


def test_permutation_p_values_against_explicit_swaps():
    rng = np.random.default_rng(0)
    n, reps = 25, 300
    base, inter = rng.normal(size=n), rng.normal(size=n) + 0.3
    cb, ci = rng.integers(0, 6, (n, 4)), rng.integers(0, 6, (n, 4))
    ci[:, 2] += 2
    s = sign_flips(n, reps, 1)
    means, cats, tvs = [], [], []
    for row in s:
        b = [inter[k] if row[k] else base[k] for k in range(n)]
        i = [base[k] if row[k] else inter[k] for k in range(n)]
        means.append(abs(np.mean(i) - np.mean(b)))
        pb = sum(ci[k] if row[k] else cb[k] for k in range(n))
        pi = sum(cb[k] if row[k] else ci[k] for k in range(n))
        d = pi / pi.sum() - pb / pb.sum()
        cats.append(np.abs(d))
        tvs.append(0.5 * np.abs(d).sum())
    obs_mean = abs(inter.mean() - base.mean())
    obs = ci.sum(0) / ci.sum() - cb.sum(0) / cb.sum()
    p_mean = (1 + sum(m >= obs_mean - 1e-9 for m in means)) / (1 + reps)
    p_cat = [(1 + sum(c[k] >= abs(obs[k]) - 1e-9 for c in cats)) / (1 + reps) for k in range(4)]
    p_tv = (1 + sum(t >= 0.5 * np.abs(obs).sum() - 1e-9 for t in tvs)) / (1 + reps)
    assert mean_p(base, inter, s) == pytest.approx(p_mean)
    got_cat, got_tv = frequency_p(cb, ci, s)
    np.testing.assert_allclose(got_cat, p_cat)
    assert got_tv == pytest.approx(p_tv)
    assert mean_p(base, base.copy(), s) == 1.0  # no change: every permutation ties


def test_bootstrap_replicates_against_explicit_resamples():
    rng = np.random.default_rng(1)
    n = 20
    diff = rng.normal(size=n)
    cb, ci = rng.integers(0, 5, (n, 3)), rng.integers(0, 5, (n, 3))
    idx = resamples(n, 200, 4)
    w = weights(idx, n)
    np.testing.assert_allclose(mean_boot(diff, w), [np.mean([diff[k] for k in row]) for row in idx])
    change, tv = frequency_boot(cb, ci, w)
    for r, row in enumerate(idx[:20]):
        pb, pi = sum(cb[k] for k in row), sum(ci[k] for k in row)
        ref = pi / pi.sum() - pb / pb.sum()
        np.testing.assert_allclose(change[r], ref)
        assert tv[r] == pytest.approx(0.5 * np.abs(ref).sum())


def outcomes(rng, variants, levels, shift):
    """Baseline plus ``variants - 1`` edited variants; variant v's return is shifted by ``shift[v]``."""
    ret = rng.normal(size=(variants, levels)) + np.asarray(shift)[:, None]
    complete = (rng.uniform(size=(variants, levels)) < 0.5).astype(float)
    length = rng.integers(10, 50, (variants, levels)).astype(float)
    actions = rng.integers(0, 8, (variants, levels, 3))
    return Outcomes(ret, complete, length, actions)


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_compare_corrects_within_each_arm_and_metric(correction):
    rng = np.random.default_rng(2)
    arm_of = ["baseline", "mean", "mean", "mean", "p95", "p95", "p95"]
    out = outcomes(rng, len(arm_of), 30, [0, 2.0, 0, 0, 0, 0, 1.5])
    reports = compare(
        out,
        arm_of,
        ["a", "b", "c"],
        bootstrap=400,
        permutations=400,
        correction=correction,
        alpha=0.05,
        seed=3,
    )
    s, idx = sign_flips(30, 400, 3), resamples(30, 400, 3)
    for arm in ("mean", "p95"):
        members = [v for v in range(1, len(arm_of)) if arm_of[v] == arm]
        raw = [mean_p(out.ret[0], out.ret[v], s) for v in members]
        adjusted = adjust(raw, correction)
        level = interval_level(correction, 0.05, 3, int((adjusted <= 0.05).sum()))
        for v, p, q in zip(members, raw, adjusted, strict=True):
            rep = reports[v - 1]["return"]
            assert rep["p"] == pytest.approx(p) and rep["p_adjusted"] == pytest.approx(q)
            assert rep["significant"] == (q <= 0.05)
            boot = [np.mean([out.ret[v, k] - out.ret[0, k] for k in row]) for row in idx]
            assert rep["ci_corrected"] == pytest.approx(
                list(np.percentile(boot, [50 * (1 - level), 100 - 50 * (1 - level)]))
            )
            assert rep["change"] == pytest.approx(out.ret[v].mean() - out.ret[0].mean())
    assert reports[0]["return"]["significant"] and reports[5]["return"]["significant"]
    assert set(reports[0]) == {"return", "level_complete", "length", "tv_distance", "actions"}
    assert set(reports[0]["actions"]) == {"a", "b", "c"}
