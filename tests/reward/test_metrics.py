"""The reward model's correlation report (the correlations are tested in tests/stats); pair accuracy."""

import numpy as np
import pytest

from proclab.reward.metrics import correlations, pair_accuracy
from proclab.stats.correlation import spearman


def test_correlations_report_the_length_baseline():
    true, lengths = np.array([1.0, 5, 3, 9]), np.array([10, 60, 20, 90])
    out = correlations(np.array([0.1, 0.2, 0.3, 0.4]), true, lengths)
    assert out["baseline_spearman"] == pytest.approx(1.0)  # longer = better in this toy: baseline is perfect
    assert out["spearman"] == pytest.approx(spearman([1, 2, 3, 4], true))
    assert set(out) == {"pearson", "spearman", "baseline_pearson", "baseline_spearman"}


def test_pair_accuracy_counts_ties_half():
    assert pair_accuracy(np.array([[0.0, 1.0], [2.0, 1.0], [3.0, 3.0], [0.0, 5.0]])) == pytest.approx(2.5 / 4)
