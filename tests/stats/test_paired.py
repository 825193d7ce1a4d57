"""The exact McNemar test against the binomial enumerated by hand and against every sign flip of the
discordant pairs."""

import itertools
import math

import pytest

from paired_fixtures import paired_outcomes
from proclab.stats.paired import mcnemar


def enumerated_p(lost: int, gained: int) -> float:
    """Two-sided exact p by enumerating the binomial(n, 1/2): the probability of every split of the
    discordant pairs at most as likely as the observed one."""
    n = lost + gained
    observed = math.comb(n, gained)
    return min(1.0, sum(math.comb(n, k) for k in range(n + 1) if math.comb(n, k) <= observed) / 2**n)


def sign_flip_p(lost: int, gained: int) -> float:
    """The same p by the paired permutation of every unit's two outcomes: each discordant pair is swapped
    or not (2^n equally likely), p = share of assignments with |gained - lost| at least the observed."""
    n, observed = lost + gained, abs(gained - lost)
    hits = sum(abs(sum(s) - (n - sum(s))) >= observed for s in itertools.product((0, 1), repeat=n))
    return hits / 2**n


@pytest.mark.parametrize(
    "lost,gained,both,neither",
    [(0, 0, 5, 5), (0, 5, 150, 45), (3, 9, 10, 2), (7, 7, 0, 1), (1, 12, 3, 0), (10, 2, 0, 0), (0, 1, 0, 0)],
)
def test_mcnemar_matches_the_enumerated_binomial_and_the_sign_flips(lost, gained, both, neither):
    got = mcnemar(*paired_outcomes(lost, gained, both, neither))
    assert (got.lost, got.gained) == (lost, gained)
    assert got.p == pytest.approx(enumerated_p(lost, gained), abs=1e-12)
    assert got.p == pytest.approx(sign_flip_p(lost, gained), abs=1e-12)


def test_concordant_units_carry_no_evidence():
    """Only the discordant units count: adding units that agree changes nothing; none discordant is p = 1;
    a change in every one of 6 units, all one way, is 2 / 2^6."""
    few = mcnemar(*paired_outcomes(0, 5, 0, 0))
    many = mcnemar(*paired_outcomes(0, 5, 500, 500))
    assert few == many and few.p == pytest.approx(2 / 2**5)
    assert mcnemar(*paired_outcomes(0, 0, 40, 60)).p == 1.0 and mcnemar([], []).p == 1.0
    assert mcnemar(*paired_outcomes(6, 0, 0, 0)).p == pytest.approx(2 / 2**6)
    with pytest.raises(ValueError, match="shape"):
        mcnemar([True, False], [True])


def test_one_sided_mcnemar_counts_only_the_tail_asked_for():
    """``greater``: the chance of at least ``gained`` of the discordant units going the second condition's
    way, ``less`` of at most that many; 6 of 6 one way is 1 / 2^6 on its side and 1 on the other."""
    one_way = paired_outcomes(0, 6, 10, 10)
    assert mcnemar(*one_way, alternative="greater").p == pytest.approx(1 / 2**6)
    assert mcnemar(*one_way, alternative="less").p == 1.0
    mixed = paired_outcomes(2, 7, 0, 0)
    tail = sum(math.comb(9, k) for k in range(7, 10)) / 2**9
    assert mcnemar(*mixed, alternative="greater").p == pytest.approx(tail)
    assert mcnemar(*mixed, alternative="less").p == pytest.approx(1 - tail + math.comb(9, 7) / 2**9)
    with pytest.raises(ValueError, match="alternative"):
        mcnemar(*mixed, alternative="bigger")
