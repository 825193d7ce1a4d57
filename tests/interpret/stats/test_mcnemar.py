"""The exact McNemar test of paired binary outcomes, and the Holm correction over a family of them."""

import itertools
import math

import numpy as np
import pytest

from proclab.interpret.stats.corrections import holm
from proclab.interpret.stats.paired import (
    against_share,
    binary_change,
    correct,
    mcnemar,
    mean_change,
    resamples,
)


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


def exact_sign_flip_p(base, inter) -> float:
    """Every one of the 2^n swaps of the units' two values: the share with |mean difference| at least
    the observed one."""
    d = np.asarray(inter, float) - np.asarray(base, float)
    observed = abs(d.mean())
    flips = np.array(list(itertools.product((1.0, -1.0), repeat=len(d))))
    return float(np.mean(np.abs(flips @ d / len(d)) >= observed - 1e-12))


def test_against_share_matches_every_sign_flip_and_is_not_fooled_by_few_discordant_units():
    rng = np.random.default_rng(4)
    share = rng.choice([0.0, 0.05, 0.1, 0.9, 1.0], size=12)
    inter = (rng.random(12) < 0.6).astype(float)
    got = against_share(share, inter, resamples(12, 500, 0), reps=20000, seed=1)
    assert got["p_permutation"] == pytest.approx(exact_sign_flip_p(share, inter), abs=0.01)
    # Planted: 5 of 200 units reach the target in the tested arm and in almost no control arm; the rest
    # agree. The bootstrap interval excludes zero, the permutation p is about 2 / 2^5.
    share = np.zeros(200)
    share[150:] = 1.0
    inter = share.copy()
    inter[:5] = 1.0
    got = against_share(share, inter, resamples(200, 2000, 0), reps=20000, seed=2)
    assert got["ci95"][0] > 0 and "significant" not in got
    assert got["p_permutation"] == pytest.approx(0.0625, abs=0.01)
    correct([got])
    assert not got["significant"]
