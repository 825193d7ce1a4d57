"""Permutation p-values against explicit counts (ties, tolerance, NaN), sign flips, and the exact
two-sample test against every split enumerated by hand."""

import itertools
import math

import numpy as np
import pytest

from proclab.stats.permutation import exact_permutation_p, permutation_p, sign_flips


def test_permutation_p_counts_the_observed_arrangement_as_one_draw():
    null = [0.1, 0.5, 0.5, 0.9, float("nan")]
    assert permutation_p(0.5, null) == (1 + 3) / (1 + 5)  # ties count, NaN does not
    assert permutation_p(2.0, null) == 1 / 6  # never zero
    assert permutation_p(0.5 + 1e-13, null) == 2 / 6
    assert permutation_p(0.5 + 1e-13, null, tolerance=1e-12) == 4 / 6
    assert permutation_p(0.3, []) == 1.0
    observed = np.array([0.2, 0.95])
    null2 = np.array([[0.1, 0.9], [0.3, 0.99], [0.2, 0.5]])
    expected = [(1 + sum(row[j] >= observed[j] for row in null2)) / 4 for j in range(2)]
    np.testing.assert_array_equal(permutation_p(observed, null2), expected)


def test_sign_flips_are_fair_coins_seeded_apart_from_the_resamples():
    s = sign_flips(50, 400, 3)
    assert s.shape == (400, 50) and set(np.unique(s)) == {0.0, 1.0}
    assert abs(s.mean() - 0.5) < 0.02
    np.testing.assert_array_equal(s, sign_flips(50, 400, 3))
    assert not np.array_equal(s, np.random.default_rng(3).integers(0, 2, (400, 50)))
    with pytest.raises(ValueError):
        sign_flips(0, 3, 0)


def enumerated_p(a, b):
    pooled, observed, count, total = a + b, abs(sum(a) / len(a) - sum(b) / len(b)), 0, 0
    for pick in itertools.combinations(range(len(pooled)), len(a)):
        x = [pooled[i] for i in pick]
        y = [pooled[i] for i in range(len(pooled)) if i not in pick]
        count += abs(sum(x) / len(x) - sum(y) / len(y)) >= observed - 1e-12
        total += 1
    return count / total


@pytest.mark.parametrize("sizes", [(3, 3), (5, 5), (4, 3), (1, 4)])
def test_exact_permutation_p_is_the_share_of_splits(sizes):
    rng = np.random.default_rng(sum(sizes))
    a, b = rng.normal(0, 1, sizes[0]).tolist(), rng.normal(0.5, 1, sizes[1]).tolist()
    assert exact_permutation_p(a, b) == pytest.approx(enumerated_p(a, b))
    # fully separated groups reach the smallest p an exact two-sided test can give: 2 / C(2n, n) for n + n
    # values (the split and its mirror), 1 / C(n + m, n) for unequal groups, whose mirror split does not exist
    separated = exact_permutation_p([10.0 + i for i in range(sizes[0])], [float(i) for i in range(sizes[1])])
    assert separated == pytest.approx((2 if sizes[0] == sizes[1] else 1) / math.comb(sum(sizes), sizes[0]))
    assert exact_permutation_p([1.0] * sizes[0], [1.0] * sizes[1]) == 1.0  # all equal: every split ties
