"""Intervals of a share against their definitions (the exact interval by bisection on the binomial, Wilson's
as the set its score test accepts), their coverage computed exactly, and two shares compared (Fisher's p by
summing hypergeometric probabilities)."""

import math

import numpy as np
import pytest
from scipy import stats

from proclab.errors import ProclabError
from proclab.stats.proportions import clopper_pearson, proportion, share_difference, wilson


def bisect(f, lo: float = 0.0, hi: float = 1.0) -> float:
    """The root of an increasing ``f`` on [lo, hi]."""
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


def exact_by_bisection(k: int, n: int, level: float) -> tuple[float, float]:
    """The lower end is the share p at which seeing k or more successes has probability (1 - level) / 2,
    the upper end the one at which seeing k or fewer has it (0 and 1 at the edges)."""
    tail = (1 - level) / 2
    low = 0.0 if k == 0 else bisect(lambda p: stats.binom.sf(k - 1, n, p) - tail)
    high = 1.0 if k == n else bisect(lambda p: tail - stats.binom.cdf(k, n, p))
    return low, high


@pytest.mark.parametrize(
    "k,n", [(0, 10), (1, 10), (5, 10), (10, 10), (3, 37), (17, 40), (1, 200), (120, 500), (0, 1), (1, 1)]
)
@pytest.mark.parametrize("level", [0.95, 0.9, 1 - 0.05 / 7])
def test_the_exact_interval_inverts_the_binomial_tests(k, n, level):
    assert clopper_pearson(k, n, level) == pytest.approx(exact_by_bisection(k, n, level), abs=1e-9)


def test_no_trial_excludes_nothing_and_the_edges_are_closed():
    assert clopper_pearson(0, 0) == (0.0, 1.0) and wilson(0, 0) == (0.0, 1.0)
    assert clopper_pearson(0, 12).low == 0.0 and clopper_pearson(12, 12).high == 1.0
    assert 0.0 < clopper_pearson(0, 12).high < 1.0 and 0.0 < clopper_pearson(12, 12).low < 1.0
    lo, hi = clopper_pearson(3, 4)  # unpacks like the (lo, hi) pair it is
    assert lo < 0.75 < hi


def coverage(intervals: np.ndarray, n: int, p: float) -> float:
    """Exact coverage at share ``p``: the binomial probability of the counts whose interval holds ``p``."""
    k = np.arange(n + 1)
    inside = (intervals[:, 0] <= p) & (p <= intervals[:, 1])
    return stats.binom.pmf(k, n, p)[inside].sum()


def test_the_exact_interval_covers_every_share_where_wald_and_wilson_fall_short():
    """Over every count of n trials: the exact interval never covers less than 95 %; the normal (Wald)
    interval does at small shares (at k = 0 it is the single point 0), Wilson's near 0."""
    for n in (10, 20, 30, 100):
        k = np.arange(n + 1)
        exact = np.array([clopper_pearson(int(i), n) for i in k])
        for p in np.linspace(0.001, 0.999, 101):
            assert coverage(exact, n, p) >= 0.95
        wald_half = 1.96 * np.sqrt(k / n * (1 - k / n) / n)
        wald = np.stack([k / n - wald_half, k / n + wald_half], 1)
        assert coverage(wald, n, 0.05) < 0.95
    score = np.array([wilson(int(i), 20) for i in range(21)])
    assert min(coverage(score, 20, p) for p in np.linspace(0.001, 0.2, 200)) < 0.93


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 16), (16, 16), (20, 64), (1, 1)])
def test_wilson_is_the_set_its_score_test_accepts(k, n):
    """Wilson's interval is every p with |k/n - p| <= z sqrt(p (1 - p) / n): found here on a fine grid."""
    z = 1.959963984540054
    grid = np.linspace(0, 1, 200_001)
    inside = grid[np.abs(k / n - grid) <= z * np.sqrt(grid * (1 - grid) / n)]
    lo, hi = wilson(k, n)
    assert lo == pytest.approx(inside.min(), abs=1e-5) and hi == pytest.approx(inside.max(), abs=1e-5)


def test_proportion_counts_the_outcomes():
    got = proportion([True, False, True, True])
    assert (got.count, got.of, got.share) == (3, 4, 0.75)
    assert got.ci == clopper_pearson(3, 4) and got.method == "exact"
    assert proportion(np.array([1, 0, 0]), method="wilson", level=0.9).ci == wilson(1, 3, 0.9)
    none = proportion([])
    assert none.share is None and none.ci == (0.0, 1.0)
    with pytest.raises(ProclabError, match="interval method"):
        proportion([True], method="wald")


def fisher_p(a: int, n: int, b: int, m: int) -> float:
    """Fisher's exact two-sided p: the hypergeometric probabilities of every table with the same margins
    no more likely than the observed one."""
    col, tot = a + b, n + m
    prob = lambda x: math.comb(n, x) * math.comb(m, col - x) / math.comb(tot, col)  # noqa: E731
    observed = prob(a)
    return sum(prob(x) for x in range(max(0, col - m), min(col, n) + 1) if prob(x) <= observed * (1 + 1e-7))


@pytest.mark.parametrize(("a", "n", "b", "m"), [(5, 16, 10, 64), (0, 12, 6, 20), (16, 16, 3, 40)])
def test_share_difference_is_newcombes_interval_and_fishers_p(a, n, b, m):
    d = share_difference(a, n, b, m)
    p1, p2 = a / n, b / m
    assert d.difference == pytest.approx(p1 - p2)
    (l1, u1), (l2, u2) = wilson(a, n), wilson(b, m)  # Newcombe's method 10, written out
    assert d.ci.low == pytest.approx(p1 - p2 - math.hypot(p1 - l1, u2 - p2))
    assert d.ci.high == pytest.approx(p1 - p2 + math.hypot(u1 - p1, p2 - l2))
    assert d.ci.low <= d.difference <= d.ci.high
    assert d.p == pytest.approx(fisher_p(a, n, b, m), rel=1e-6)
    with pytest.raises(ValueError):
        share_difference(1, 0, 2, 3)
