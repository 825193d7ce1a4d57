"""The percentile interval that the sweep, the atlas and every paired comparison share."""

import math

import numpy as np

from proclab.interpret.stats.paired import interval, percentile_interval


def linear_percentile(values: list[float], q: float) -> float:
    """The q-th percentile by linear interpolation between the two nearest sorted values (numpy's default)."""
    ordered = sorted(values)
    position = q / 100 * (len(ordered) - 1)
    lo, hi = math.floor(position), math.ceil(position)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (position - lo)


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
