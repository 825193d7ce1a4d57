"""Binary outcomes of two arms as the analyses report them: the exact McNemar test (tested in tests/stats) where
a bootstrap is too sure, the Holm correction over a family, and a binary outcome against control arms' share."""

import itertools

import numpy as np
import pytest

from paired_fixtures import paired_outcomes
from proclab.interpret.stats.paired import against_share, binary_change, correct, mean_change
from proclab.stats.bootstrap import resamples
from proclab.stats.corrections import holm


def test_five_levels_gained_of_200_are_significant_by_bootstrap_and_not_by_mcnemar():
    """Planted: 5 of 200 levels gained, none lost (the retargeting result's shape). The percentile
    bootstrap over levels excludes zero; the exact test gives 2 / 2^5 = 0.0625."""
    base, inter = paired_outcomes(0, 5, 40, 155)
    boot = mean_change(base, inter, resamples(200, 2000, 0))
    assert boot["significant"] and boot["ci95"][0] > 0  # the old, wrong call
    exact = binary_change(base, inter)
    assert exact["p_exact"] == pytest.approx(0.0625) and exact["change"] == pytest.approx(0.025)
    correct([exact])
    assert not exact["significant"]


def test_a_real_effect_is_found_and_correct_applies_holm_to_the_family():
    strong = binary_change(*paired_outcomes(1, 20, 50, 29))
    weak = binary_change(*paired_outcomes(2, 6, 50, 42))
    none = binary_change(*paired_outcomes(4, 4, 50, 42))
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
