"""Pearson's and Spearman's correlations and average ranks against hand computations, a slow reference
(ranks by counting) and scipy; constant input is undefined."""

import math

import numpy as np
import pytest
from scipy import stats

from proclab.stats.correlation import pearson, ranks, spearman


def counted_ranks(x) -> list[float]:
    """Average rank of each value: 1 + the values below it + half of the other values equal to it."""
    return [1 + sum(v < a for v in x) + (sum(v == a for v in x) - 1) / 2 for a in x]


def test_pearson_by_hand():
    x, y = [1, 2, 3, 4], [2, 4, 5, 9]
    # means 2.5 and 5; deviations (-1.5, -.5, .5, 1.5) and (-3, -1, 0, 4)
    expected = (4.5 + 0.5 + 0 + 6) / math.sqrt(5 * 26)
    assert pearson(x, y) == pytest.approx(expected, rel=1e-12)
    assert pearson(x, [-v for v in y]) == pytest.approx(-expected, rel=1e-12)
    with pytest.raises(ValueError, match="same length"):
        pearson([1, 2], [1, 2, 3])


def test_ranks_and_spearman_with_ties_by_hand():
    assert ranks([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]
    x, y = [10, 20, 20, 5], [1, 3, 2, 0]
    # ranks (2, 3.5, 3.5, 1) and (2, 4, 3, 1): Pearson of the ranks
    assert spearman(x, y) == pytest.approx(pearson([2, 3.5, 3.5, 1], [2, 4, 3, 1]), rel=1e-12)
    assert spearman([1, 2, 3, 4], [1, 8, 27, 64]) == pytest.approx(1.0)  # monotone, not linear
    assert pearson([1, 2, 3, 4], [1, 8, 27, 64]) < 0.99
    falling = spearman([1, 2, 3, 4], [9, 7, 7, 1])  # ranks (4, 2.5, 2.5, 1)
    assert falling == pytest.approx(pearson([1, 2, 3, 4], [4, 2.5, 2.5, 1])) and falling < 0


@pytest.mark.parametrize("seed", range(4))
def test_against_counted_ranks_and_scipy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    x = rng.integers(0, 6, n).astype(float)  # many ties
    y = x + rng.normal(0, 2, n).round()
    assert ranks(x).tolist() == counted_ranks(x.tolist())
    np.testing.assert_array_equal(ranks(x), stats.rankdata(x))
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
    assert spearman(x, y) == pytest.approx(pearson(counted_ranks(x.tolist()), counted_ranks(y.tolist())))


def test_constant_or_too_short_input_has_no_correlation():
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3])) and math.isnan(spearman([1, 2, 3], [4, 4, 4]))
    assert math.isnan(pearson([1.0], [2.0])) and math.isnan(spearman([], []))
