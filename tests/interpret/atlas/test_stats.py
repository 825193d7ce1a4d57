"""The atlas' statistics against slow, obvious references: lagged correlations with episode-bootstrap
intervals, kurtosis, activity, progress histograms, extreme moments, Spearman with a CI over directions,
and the gradient prediction of an edit."""

import numpy as np
import pytest
from scipy import stats

from proclab.interpret.atlas.activation import active_mask, excess_kurtosis, extreme_rows, progress_histogram
from proclab.interpret.atlas.prediction import predicted_changes, spearman_by_groups
from proclab.interpret.atlas.tracking import Steps, normal_p, proximity_columns, tracking
from proclab.stats.bootstrap import resamples


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


def test_spearman_interval_over_directions():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 5, 30).astype(float)  # ties
    y = x + rng.normal(size=30)
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


def planted_points(rng, directions=24, arms=("mean", "p05", "p95"), noise=0.3, informative=True):
    """Edits whose measured effect is the gradient's prediction plus measurement noise (``informative``),
    or unrelated to it; every effect measured on two halves of the levels apart."""
    points = []
    for m in range(directions):
        for arm in arms:
            pred = rng.lognormal()
            true = pred if informative else rng.lognormal()
            a, b = true + noise * rng.normal(), true + noise * rng.normal()
            points.append(
                {
                    "direction": m,
                    "arm": arm,
                    "predicted": {"value": -pred},  # signs do not matter: magnitudes are ranked
                    "measured": {"value": (a + b) / 2},
                    "halves": {"value": [a, b]},
                    "edit_size": rng.lognormal(),
                    "shuffled": {"value": rng.lognormal()},
                }
            )
    return points


def test_planted_gradients_that_do_rank_the_effects_are_found_and_unrelated_ones_are_not():
    from proclab.interpret.atlas.prediction import pairing

    rng = np.random.default_rng(0)
    good = pairing(planted_points(rng), "value", reps=300, seed=0)
    assert good["rho"] > 0.8 and good["ci95"][0] > 0.6 and good["p_permutation"] < 0.01
    assert all(good["rho"] - b > 0.4 for b in good["baselines"].values())  # gradients beat both baselines
    ceiling = good["noise_ceiling"]
    assert 0.8 < ceiling["reliability"] <= 1 and ceiling["rho_corrected"] >= good["rho"]
    null = [pairing(planted_points(rng, informative=False), "value", reps=99, seed=s) for s in range(20)]
    p = np.array([r["p_permutation"] for r in null])
    assert np.mean(p <= 0.05) <= 0.05 + 2.33 * np.sqrt(0.05 * 0.95 / 20) and np.median(p) > 0.2


def test_permutation_null_and_the_ceiling_by_hand():
    from proclab.interpret.atlas.prediction import noise_ceiling, permutation_p

    rng = np.random.default_rng(1)
    x, y = rng.normal(size=12), rng.normal(size=12)
    arms = np.array(["a", "b"] * 6)
    got = permutation_p(x, y, arms, reps=200, seed=3)
    g = np.random.default_rng([3, 9])  # the same draws, written out
    observed, hits = stats.spearmanr(x, y).statistic, 0
    for _ in range(200):
        xs = x.copy()
        for a in ("a", "b"):
            idx = np.flatnonzero(arms == a)
            xs[idx] = x[g.permutation(idx)]
        hits += stats.spearmanr(xs, y).statistic >= observed - 1e-12
    assert got == pytest.approx((1 + hits) / 201)
    a, b = rng.normal(size=30), rng.normal(size=30)
    b = a + 0.5 * b
    split = stats.spearmanr(a, b).statistic
    c = noise_ceiling(a, b, 0.4)
    assert c["reliability"] == pytest.approx(2 * split / (1 + split))
    assert c["rho_corrected"] == pytest.approx(0.4 / np.sqrt(2 * split / (1 + split)))
    assert noise_ceiling(a, -a, 0.4)["rho_corrected"] is None


def test_proximity_of_each_kind_against_a_loop_over_steps():
    """``gt <kind> proximity``: 1 / (1 + distance to the nearest one) from its offsets, 0 where there is none."""
    rng = np.random.default_rng(0)
    names = ["agent_x", "goal_distance", "saw_dx", "saw_dy", "crate_dx", "crate_dy", "lonely_dx"]
    values = rng.normal(size=(50, len(names))) * 3
    values[rng.random(50) < 0.3, 2:4] = np.nan  # levels without a saw
    values[:10, 4:6] = np.nan
    got = proximity_columns(values, names)
    assert sorted(got) == ["gt crate proximity", "gt saw proximity"]  # lonely_dx has no _dy: no proximity
    for kind, col in (("saw", 2), ("crate", 4)):
        for i in range(50):
            dx, dy = values[i, col], values[i, col + 1]
            want = 0.0 if np.isnan(dx) else 1.0 / (1.0 + float(np.sqrt(dx * dx + dy * dy)))
            assert got[f"gt {kind} proximity"][i] == pytest.approx(want, abs=1e-12)
