"""Holm and Benjamini-Hochberg against their step-down / step-up definitions and their textbook loops,
ties, all-equal and single p-values, and the level of the corrected intervals."""

import numpy as np
import pytest

from proclab.errors import ProclabError
from proclab.stats.corrections import adjust, benjamini_hochberg, holm, interval_level


def p_values(seed):
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(size=9), rng.uniform(0, 0.01, 4), [0.02, 0.02, 1.0]])  # ties, small, one
    return rng.permutation(p)


def textbook(p) -> tuple[np.ndarray, np.ndarray]:
    """Holm's and BH's adjusted p-values written out from the sorted p-values, one test at a time."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    holm_ref, bh_ref = np.zeros(m), np.zeros(m)
    for rank, i in enumerate(order):
        holm_ref[i] = min(1.0, max((m - j) * p[order[j]] for j in range(rank + 1)))
        bh_ref[i] = min(1.0, min(m * p[order[j]] / (j + 1) for j in range(rank, m)))
    return holm_ref, bh_ref


@pytest.mark.parametrize("seed", range(5))
def test_holm_and_bh_against_their_definitions(seed):
    p = p_values(seed)
    m = len(p)
    holm_ref, bh_ref = textbook(p)
    np.testing.assert_allclose(holm(p), holm_ref, rtol=1e-12)
    np.testing.assert_allclose(benjamini_hochberg(p), bh_ref, rtol=1e-12)
    order = sorted(range(m), key=lambda i: p[i])
    for alpha in (0.01, 0.05, 0.2):
        step_down = set()  # Holm: reject in order while p_(i) <= alpha / (m - i)
        for rank, i in enumerate(order):
            if p[i] > alpha / (m - rank):
                break
            step_down.add(i)
        last = max((rank for rank, i in enumerate(order) if p[i] <= (rank + 1) * alpha / m), default=-1)
        step_up = set(order[: last + 1])  # BH: every p up to the largest p_(i) <= (i + 1) alpha / m
        assert set(np.flatnonzero(adjust(p, "holm") <= alpha)) == step_down
        assert set(np.flatnonzero(adjust(p, "bh") <= alpha)) == step_up


def test_equal_single_and_no_p_values():
    """All equal: Holm multiplies each by m (then the running maximum keeps them equal), BH leaves them
    as they are; one test is not corrected; an empty family is empty."""
    same = np.full(5, 0.03)
    np.testing.assert_allclose(holm(same), np.full(5, 0.15))
    np.testing.assert_allclose(benjamini_hochberg(same), same)
    np.testing.assert_allclose(holm([0.3, 0.3, 0.9]), [0.9, 0.9, 0.9])  # capped order, not m * p each
    assert holm([0.04]).tolist() == [0.04] and benjamini_hochberg([0.04]).tolist() == [0.04]
    assert holm([]).shape == benjamini_hochberg([]).shape == (0,)
    assert holm([0.5, 0.6]).max() <= 1.0 and benjamini_hochberg([0.9, 1.0]).max() <= 1.0


def test_interval_levels_and_unknown_corrections():
    assert interval_level("holm", 0.05, 16, 3) == pytest.approx(1 - 0.05 / 16)
    assert interval_level("bh", 0.05, 16, 3) == pytest.approx(1 - 3 * 0.05 / 16)
    assert interval_level("bh", 0.05, 16, 0) == pytest.approx(1 - 0.05 / 16)
    with pytest.raises(ProclabError, match="correction"):
        adjust([0.1], "bonferroni")
    with pytest.raises(ProclabError, match="correction"):
        interval_level("bonferroni", 0.05, 3, 0)
