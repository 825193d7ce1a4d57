"""The exact McNemar test of paired binary outcomes, and the Holm correction over a family of them."""

import itertools
import math

import numpy as np
import pytest

from proclab.interpret.stats.corrections import holm
from proclab.interpret.stats.paired import binary_change, correct, mcnemar, mean_change, resamples


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


def pairs(lost: int, gained: int, both: int, neither: int) -> tuple[np.ndarray, np.ndarray]:
    base = np.array([1] * lost + [0] * gained + [1] * both + [0] * neither, bool)
    inter = np.array([0] * lost + [1] * gained + [1] * both + [0] * neither, bool)
    order = np.random.default_rng(lost * 100 + gained).permutation(len(base))
    return base[order], inter[order]


@pytest.mark.parametrize(
    "lost,gained,both,neither",
    [(0, 0, 5, 5), (0, 5, 150, 45), (3, 9, 10, 2), (7, 7, 0, 1), (1, 12, 3, 0), (10, 2, 0, 0)],
)
def test_mcnemar_matches_the_enumerated_binomial_and_the_sign_flips(lost, gained, both, neither):
    base, inter = pairs(lost, gained, both, neither)
    got = mcnemar(base, inter)
    assert (got["lost"], got["gained"]) == (lost, gained)
    assert got["p_exact"] == pytest.approx(enumerated_p(lost, gained), abs=1e-12)
    assert got["p_exact"] == pytest.approx(sign_flip_p(lost, gained), abs=1e-12)


def test_five_levels_gained_of_200_are_significant_by_bootstrap_and_not_by_mcnemar():
    """Planted: 5 of 200 levels gained, none lost (the retargeting result's shape). The percentile
    bootstrap over levels excludes zero; the exact test gives 2 / 2^5 = 0.0625."""
    base, inter = pairs(0, 5, 40, 155)
    boot = mean_change(base, inter, resamples(200, 2000, 0))
    assert boot["significant"] and boot["ci95"][0] > 0  # the old, wrong call
    exact = binary_change(base, inter)
    assert exact["p_exact"] == pytest.approx(0.0625) and exact["change"] == pytest.approx(0.025)
    correct([exact])
    assert not exact["significant"]


def test_a_real_effect_is_found_and_correct_applies_holm_to_the_family():
    strong = binary_change(*pairs(1, 20, 50, 29))
    weak = binary_change(*pairs(2, 6, 50, 42))
    none = binary_change(*pairs(4, 4, 50, 42))
    family = [strong, weak, none]
    raw = [t["p_exact"] for t in family]
    correct(family)
    np.testing.assert_allclose([t["p_adjusted"] for t in family], holm(raw))
    assert strong["significant"] and not none["significant"] and strong["p_adjusted"] < 1e-3
    assert [t["significant"] for t in family] == [p <= 0.05 for p in holm(raw)]
