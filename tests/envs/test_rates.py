"""The exact (Clopper-Pearson) interval of a share of episodes: against its definition solved by bisection,
and its coverage computed exactly from binomial probabilities."""

import numpy as np
import pytest
from scipy import stats

from proclab.envs.episodes import clopper_pearson, rate


def bisect(f, lo: float = 0.0, hi: float = 1.0) -> float:
    """The root of an increasing ``f`` on [lo, hi]."""
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


@pytest.mark.parametrize("k,n", [(0, 10), (1, 10), (5, 10), (10, 10), (3, 37), (120, 500)])
def test_the_interval_is_its_definition(k, n):
    """The lower end is the share p at which seeing k or more successes has probability 2.5 %, the upper
    end the one at which seeing k or fewer has probability 2.5 % (0 and 1 at the edges)."""
    low = 0.0 if k == 0 else bisect(lambda p: stats.binom.sf(k - 1, n, p) - 0.025)
    high = 1.0 if k == n else bisect(lambda p: 0.025 - stats.binom.cdf(k, n, p))
    assert clopper_pearson(k, n) == pytest.approx((low, high), abs=1e-9)


def test_it_covers_at_least_95_percent_where_the_normal_interval_does_not():
    """Exact coverage over every count of n episodes: the normal (Wald) interval falls short at small
    shares (at k = 0 it is the single point 0); the exact interval never does."""
    for n in (10, 30, 100):
        k = np.arange(n + 1)
        exact = np.array([clopper_pearson(int(i), n) for i in k])
        wald_half = 1.96 * np.sqrt(k / n * (1 - k / n) / n)
        for p in (0.01, 0.05, 0.2, 0.5, 0.9):
            weight = stats.binom.pmf(k, n, p)
            assert weight[(exact[:, 0] <= p) & (p <= exact[:, 1])].sum() >= 0.95
        assert stats.binom.pmf(k, n, 0.05)[np.abs(k / n - 0.05) <= wald_half].sum() < 0.95


def test_rate_counts_and_shares():
    assert rate([True, False, True, True]) == {
        "count": 3,
        "of": 4,
        "rate": 0.75,
        "ci95": list(clopper_pearson(3, 4)),
    }
    assert rate([])["rate"] is None and rate([])["ci95"] == [0.0, 1.0]
