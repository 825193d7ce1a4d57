"""Bootstrap draws, replicates and percentile intervals against explicit loops: units and whole clusters
drawn one resample at a time, statistics recomputed row by row, percentiles by sorting."""

import math

import numpy as np
import pytest

from proclab.stats.bootstrap import (
    bootstrap_ci,
    bootstrap_replicates,
    cluster_resamples,
    interval,
    percentile_interval,
    resamples,
    weights,
)


def linear_percentile(values: list[float], q: float) -> float:
    """The q-th percentile by linear interpolation between the two nearest sorted values (numpy's default)."""
    ordered = sorted(values)
    position = q / 100 * (len(ordered) - 1)
    lo, hi = math.floor(position), math.ceil(position)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (position - lo)


def test_one_draw_is_every_resample_drawn_in_turn():
    """The resamples of a seed are the same drawn at once or one after another from its generator, so a
    caller that draws one resample at a time gets the same resamples."""
    for n in (1, 7, 40, 1001):
        rng = np.random.default_rng(3)
        one_by_one = np.stack([rng.integers(0, n, n) for _ in range(25)])
        np.testing.assert_array_equal(resamples(n, 25, 3), one_by_one)
    shared = np.random.default_rng(5)
    first = resamples(10, 4, shared)  # a generator is drawn from where it stands
    np.testing.assert_array_equal(np.vstack([first, resamples(10, 4, shared)]), resamples(10, 8, 5))
    with pytest.raises(ValueError):
        resamples(0, 5, 0)


def test_weights_count_the_draws():
    idx = resamples(9, 50, 1)
    w = weights(idx, 9)
    assert w.shape == (50, 9) and (w.sum(1) == 9).all()
    for row, counts in zip(idx, w, strict=True):
        assert counts.tolist() == [float(list(row).count(u)) for u in range(9)]


def test_cluster_resamples_draw_whole_clusters_in_turn():
    """Each resample draws as many clusters as there are, with replacement, each with all its rows (rows
    of a cluster ascending, clusters in the order of their sorted labels)."""
    labels = np.array(["b", "a", "b", "c", "a", "a", "c", "b"])
    members = {g: [i for i, v in enumerate(labels) if v == g] for g in ("a", "b", "c")}
    rng = np.random.default_rng(11)
    for rows in cluster_resamples(labels, 30, 11):
        drawn = rng.integers(0, 3, 3)
        assert rows.tolist() == [i for g in drawn for i in members["abc"[g]]]


def test_replicates_and_interval_against_an_explicit_loop():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=30), rng.normal(size=30)

    def stat(a, b):
        return float(np.median(a) - b.mean())

    boot = []
    idx_rng = np.random.default_rng(4)
    for _ in range(200):
        rows = idx_rng.integers(0, 30, 30)
        boot.append(stat(x[rows], y[rows]))
    np.testing.assert_array_equal(bootstrap_replicates(stat, (x, y), 200, 4), boot)
    lo, hi = bootstrap_ci(stat, (x, y), 200, 4, 0.9)
    assert lo == pytest.approx(linear_percentile(boot, 5.0), abs=1e-12)
    assert hi == pytest.approx(linear_percentile(boot, 95.0), abs=1e-12)


def test_interval_of_clusters_leaves_out_undefined_resamples():
    """A statistic undefined on some resamples (here: on those that hold only cluster 0) is left out of the
    interval; undefined on all, the interval is NaN."""
    labels = np.repeat([0, 1, 2], [3, 1, 1])
    x = np.arange(5.0)

    def stat(a):
        return float("nan") if (a < 3).all() else float(a.mean())

    kept = []
    for rows in cluster_resamples(labels, 100, 6):
        value = stat(x[rows])
        if not math.isnan(value):
            kept.append(value)
    assert 0 < len(kept) < 100
    got = bootstrap_ci(stat, (x,), 100, 6, clusters=labels)
    assert got == pytest.approx((linear_percentile(kept, 2.5), linear_percentile(kept, 97.5)), abs=1e-12)
    assert all(math.isnan(v) for v in bootstrap_ci(lambda a: float("nan"), (x,), 10, 0))


def test_interval_of_rows_and_columns_matches_sorting_by_hand():
    boot = np.random.default_rng(0).normal(size=(3, 101))
    for row, (lo, hi) in zip(boot, interval(boot, 0.9), strict=True):
        assert np.isclose(lo, linear_percentile(row.tolist(), 5.0))
        assert np.isclose(hi, linear_percentile(row.tolist(), 95.0))
    by_column = percentile_interval(boot.T, 0.9, axis=0)
    assert by_column.shape == (2, 3)
    np.testing.assert_allclose(by_column, np.array(interval(boot, 0.9)).T)


def test_nan_replicates_are_left_out_only_when_asked():
    boot = np.random.default_rng(1).normal(size=(50, 2))
    boot[::3, 0] = np.nan
    boot[:, 1] = np.nan
    skipped = percentile_interval(boot, axis=0, skip_nan=True)
    kept = [v for v in boot[:, 0] if not np.isnan(v)]
    assert np.isclose(skipped[0, 0], linear_percentile(kept, 2.5))
    assert np.isclose(skipped[1, 0], linear_percentile(kept, 97.5))
    assert np.isnan(skipped[:, 1]).all()  # no replicate: no interval
    assert np.isnan(percentile_interval(boot, axis=0)[:, 0]).all()  # strict: a NaN replicate poisons it
