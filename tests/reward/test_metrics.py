"""Correlation metrics against hand computations (and scipy, where installed); pair accuracy."""

import math

import numpy as np
import pytest

from proclab.reward.metrics import average_ranks, correlations, pair_accuracy, pearson, spearman


def test_pearson_by_hand():
    x, y = [1, 2, 3, 4], [2, 4, 5, 9]
    # means 2.5 and 5; deviations (-1.5, -.5, .5, 1.5) and (-3, -1, 0, 4)
    expected = (4.5 + 0.5 + 0 + 6) / math.sqrt(5 * 26)
    assert pearson(x, y) == pytest.approx(expected, rel=1e-12)
    assert pearson(x, [-v for v in y]) == pytest.approx(-expected, rel=1e-12)
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))  # constant input: undefined


def test_spearman_with_ties_by_hand():
    assert average_ranks([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]
    x, y = [10, 20, 20, 5], [1, 3, 2, 0]
    # ranks (2, 3.5, 3.5, 1) and (2, 4, 3, 1): Pearson of the ranks
    assert spearman(x, y) == pytest.approx(pearson([2, 3.5, 3.5, 1], [2, 4, 3, 1]), rel=1e-12)
    assert spearman([1, 2, 3, 4], [1, 8, 27, 64]) == pytest.approx(1.0)  # monotone, not linear
    assert pearson([1, 2, 3, 4], [1, 8, 27, 64]) < 0.99


def test_against_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    x = rng.integers(0, 6, 200).astype(float)
    y = x + rng.normal(0, 2, 200).round()
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], rel=1e-10)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], rel=1e-10)


def test_correlations_report_the_length_baseline():
    true, lengths = np.array([1.0, 5, 3, 9]), np.array([10, 60, 20, 90])
    out = correlations(np.array([0.1, 0.2, 0.3, 0.4]), true, lengths)
    assert out["baseline_spearman"] == pytest.approx(1.0)  # longer = better in this toy: baseline is perfect
    assert out["spearman"] == pytest.approx(spearman([1, 2, 3, 4], true))
    assert set(out) == {"pearson", "spearman", "baseline_pearson", "baseline_spearman"}


def test_pair_accuracy_counts_ties_half():
    assert pair_accuracy(np.array([[0.0, 1.0], [2.0, 1.0], [3.0, 3.0], [0.0, 5.0]])) == pytest.approx(2.5 / 4)
