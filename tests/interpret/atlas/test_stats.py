"""The atlas' statistics against slow, obvious references: lagged correlations with episode-bootstrap
intervals, kurtosis, activity, progress histograms, extreme moments, Spearman with a CI over directions,
and the gradient prediction of an edit."""

import numpy as np
import pytest
from scipy import stats

from proclab.interpret.atlas.activation import active_mask, excess_kurtosis, extreme_rows, progress_histogram
from proclab.interpret.atlas.prediction import predicted_changes, spearman, spearman_by_groups
from proclab.interpret.atlas.tracking import Steps, normal_p, tracking
from proclab.interpret.stats.paired import resamples


def episodes_of(lengths):
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return [np.arange(s, s + n) for s, n in zip(starts, lengths, strict=True)]


def pooled_r(x, y, rows_by_episode, chosen, lag):
    """The reference: every (x_t, y_{t+lag}) pair inside the chosen episodes (repeats kept), then corrcoef."""
    xs, ys = [], []
    for e in chosen:
        rows = rows_by_episode[e]
        for i, row in enumerate(rows):
            if 0 <= i + lag < len(rows):
                xs.append(x[row])
                ys.append(y[rows[i + lag]])
    return np.corrcoef(xs, ys)[0, 1]


def test_lagged_correlations_and_their_episode_bootstrap_equal_explicit_pairs():
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 25, 30)
    n = int(lengths.sum())
    x = rng.normal(size=(n, 2))
    y = rng.normal(size=(n, 2))
    y[:, 1] = np.roll(x[:, 0], 2) + 0.4 * y[:, 1]  # quantity 1 follows coordinate 0 by two steps
    out = tracking(x, Steps(["a", "b"], y, lengths), lags=3, reps=40, seed=5)
    by_episode = episodes_of(lengths)
    draws = resamples(len(lengths), 40, 5)
    for m in range(2):
        for q in range(2):
            for j, lag in enumerate(range(-3, 4)):
                r = pooled_r(x[:, m], y[:, q], by_episode, range(len(lengths)), lag)
                assert out["r"][m, q, j] == pytest.approx(r, abs=1e-10)
                boot = [pooled_r(x[:, m], y[:, q], by_episode, d, lag) for d in draws]
                np.testing.assert_allclose(out["ci"][m, q, j], np.percentile(boot, [2.5, 97.5]), atol=1e-10)
    assert out["peak"][0, 1] == 2 and out["gain"][0, 1, 0] > 0.5  # leads b by two steps
    assert out["p_gain"][0, 1] < 1e-6 and out["p0"][1, 0] > 0.01  # unrelated pair: no evidence


def test_normal_p_values():
    p = normal_p(np.array([1.96, -1.96, 0.0, 3.0]), np.array([1.0, 1.0, 0.0, 0.0]), two_sided=True)
    np.testing.assert_allclose(p, [2 * stats.norm.sf(1.96), 2 * stats.norm.sf(1.96), 1.0, 0.0], atol=1e-12)
    assert normal_p(np.array([1.0]), np.array([1.0]), two_sided=False)[0] == pytest.approx(stats.norm.sf(1.0))


def test_kurtosis_activity_and_progress_against_loops():
    rng = np.random.default_rng(1)
    c = rng.standard_t(3, 500)
    assert excess_kurtosis(c) == pytest.approx(stats.kurtosis(c), rel=1e-10)
    assert np.isnan(excess_kurtosis(np.ones(5)))
    mask, rule = active_mask(c, nonnegative=False)
    med, sd = np.median(c), c.std()
    assert mask.tolist() == [abs(v - med) > 2 * sd for v in c]
    assert rule["active_high"] == pytest.approx(np.mean([v > med + 2 * sd for v in c]))
    codes = np.maximum(c, 0)
    assert active_mask(codes, nonnegative=True)[0].tolist() == [v > 0 for v in codes]
    lengths = np.array([1, 4, 11])
    progress = np.concatenate([[0.0], np.arange(4) / 3, np.arange(11) / 10])
    active = np.zeros(16, bool)
    active[[0, 4, 10, 15]] = True
    h = progress_histogram(active, progress, bins=4)
    expected = [0, 0, 0, 0]
    for p in progress[active]:
        expected[min(int(p * 4), 3)] += 1
    assert h["active"] == expected and sum(h["all"]) == lengths.sum()


def test_extreme_moments_take_each_episode_once_most_extreme_first():
    c = np.array([1.0, 5.0, 5.0, 2.0, 9.0, -3.0, 0.0, 7.0])
    lengths = np.array([3, 2, 3])  # episodes: rows 0-2, 3-4, 5-7
    top = extreme_rows(c, lengths, 5, top=True)
    assert top.tolist() == [4, 7, 1]  # 9 (ep 1), 7 (ep 2), 5 (ep 0: the earlier of the tie)
    assert extreme_rows(c, lengths, 2, top=False).tolist() == [5, 0]


def test_spearman_and_its_interval_over_directions():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 5, 30).astype(float)  # ties
    y = x + rng.normal(size=30)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert np.isnan(spearman(np.ones(4), np.arange(4.0)))
    groups = np.repeat(np.arange(10), 3)
    res = spearman_by_groups(x, y, groups, reps=60, seed=4)
    boot = []
    for draw in resamples(10, 60, 4):
        rows = np.concatenate([np.flatnonzero(groups == g) for g in draw])
        boot.append(stats.spearmanr(x[rows], y[rows]).statistic)
    np.testing.assert_allclose(res["ci95"], np.percentile(boot, [2.5, 97.5]), atol=1e-12)
    assert res["points"] == 30 and res["directions"] == 10


def test_gradient_prediction_of_an_edit_by_hand():
    rng = np.random.default_rng(3)
    gv, gpi = rng.normal(size=(6, 4)), rng.normal(size=(6, 3, 4))
    d, coord, held = rng.normal(size=4), rng.normal(size=6), np.full(6, 0.7)
    got = predicted_changes(gv, gpi, d, coord, held)
    dv = sum(gv[t] @ d * (0.7 - coord[t]) for t in range(6)) / 6
    dpi = [sum(gpi[t, a] @ d * (0.7 - coord[t]) for t in range(6)) / 6 for a in range(3)]
    assert got["value"] == pytest.approx(dv) and got["actions"] == pytest.approx(0.5 * sum(map(abs, dpi)))
