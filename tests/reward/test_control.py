"""The length control (partial and binned Spearman, bootstrap CIs) against slow, obvious references,
and on planted cases: a prediction that is a function of length only, and one that tracks the
return beyond length."""

import math

import numpy as np
import pytest

from proclab.reward.control import (
    binned_spearman,
    bootstrap_ci,
    length_bins,
    length_control,
    partial_spearman,
)


# -- slow references -------------------------------------------------------------------------------
def slow_ranks(x):
    """Rank of each value: 1 + number of smaller values + half the number of other equal values."""
    return [1 + sum(v < xi for v in x) + (sum(v == xi for v in x) - 1) / 2 for xi in x]


def slow_pearson(x, y):
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float("nan")


def slow_residuals(y, z):
    """Residuals of the least-squares line y ~ a + b z."""
    n = len(z)
    mz, my = sum(z) / n, sum(y) / n
    b = sum((zi - mz) * (yi - my) for zi, yi in zip(z, y, strict=True)) / sum((zi - mz) ** 2 for zi in z)
    return [yi - (my + b * (zi - mz)) for zi, yi in zip(z, y, strict=True)]


def slow_partial_spearman(p, t, n):
    """Correlation of the residuals of rank(p) and rank(t) after regressing each on rank(n)."""
    rp, rt, rn = slow_ranks(list(p)), slow_ranks(list(t)), slow_ranks(list(n))
    return slow_pearson(slow_residuals(rp, rn), slow_residuals(rt, rn))


def slow_binned_spearman(p, t, n, num_bins, min_bin):
    """Sort demos by length; a tie group goes to the bin of its average position; Spearman per bin."""
    ranks = slow_ranks(list(n))
    groups = {}
    for i, r in enumerate(ranks):
        groups.setdefault(min(int((r - 1) * num_bins // len(n)), num_bins - 1), []).append(i)
    total, weight = 0.0, 0
    for members in groups.values():
        if len(members) < min_bin:
            continue
        rho = slow_pearson(slow_ranks([p[i] for i in members]), slow_ranks([t[i] for i in members]))
        if not math.isnan(rho):
            total += rho * len(members)
            weight += len(members)
    return total / weight if weight else float("nan")


def demos(rng, n=300):
    """Lengths with ties (truncated episodes at the cap), returns rising with length plus noise."""
    length = np.minimum(rng.integers(30, 1200, n), 1000).astype(float)
    true = np.round(length / 100 + rng.normal(0, 2, n))
    return length, true


# -- against the references -----------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_partial_spearman_matches_the_residual_reference(seed):
    rng = np.random.default_rng(seed)
    length, true = demos(rng, 120)
    predicted = 0.3 * true + length / 200 + rng.normal(0, 1, 120)
    assert partial_spearman(predicted, true, length) == pytest.approx(
        slow_partial_spearman(predicted, true, length), abs=1e-10
    )


@pytest.mark.parametrize(("num_bins", "min_bin"), [(5, 5), (10, 5), (7, 12)])
def test_binned_spearman_matches_the_loop_reference(num_bins, min_bin):
    rng = np.random.default_rng(num_bins)
    length, true = demos(rng, 150)
    predicted = true + rng.normal(0, 3, 150)
    assert binned_spearman(predicted, true, length, num_bins, min_bin) == pytest.approx(
        slow_binned_spearman(predicted, true, length, num_bins, min_bin), abs=1e-10
    )


def test_length_bins_keep_ties_together_and_balance_counts():
    length = np.array([5, 1, 3, 3, 3, 9, 7, 8, 2, 6])
    bins = length_bins(length, 5)
    assert len({bins[i] for i in (2, 3, 4)}) == 1  # the three 3s share a bin
    assert (np.diff(bins[np.argsort(length, kind="stable")]) >= 0).all()  # bins ordered by length
    distinct = np.arange(100)[::-1]
    assert np.bincount(length_bins(distinct, 10)).tolist() == [10] * 10


def test_bootstrap_ci_matches_a_loop_over_the_same_resamples():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=40), rng.normal(size=40)
    lo, hi = bootstrap_ci(lambda a, b: float(np.mean(a - b)), (x, y), 200, np.random.default_rng(9))
    idx = np.random.default_rng(9).integers(0, 40, (200, 40))
    values = sorted(sum(x[i] - y[i] for i in row) / 40 for row in idx)
    assert lo == pytest.approx(np.percentile(values, 2.5)) and hi == pytest.approx(
        np.percentile(values, 97.5)
    )
    assert lo < np.mean(x - y) < hi


# -- planted cases --------------------------------------------------------------------------------
def test_a_length_only_prediction_has_no_partial_or_binned_correlation():
    rng = np.random.default_rng(4)
    length, true = demos(rng, 1500)
    predicted = np.log(length) + rng.normal(0, 0.05, len(length))  # knows length, nothing more
    out = length_control(predicted, true, length, bootstrap=200)
    assert out["spearman"] > 0.6  # the plain metric looks good...
    # ...but given length (almost) nothing is left: ranks partialled linearly leave a small bias where the
    # rank relation bends (here the block of episodes tied at the cap), so "about 0", not exactly 0
    assert abs(out["partial_spearman"]) < 0.1 and out["partial_spearman_lo"] < 0.05
    # within length bins it does no better than length itself
    assert out["binned_spearman"] < out["baseline_binned_spearman"] + 0.03
    assert out["spearman_gain_lo"] < 0.02  # no better than the +1/step baseline


def test_a_prediction_tracking_return_beyond_length_has_a_positive_partial():
    rng = np.random.default_rng(5)
    length, true = demos(rng, 1500)
    predicted = length / 100 + 0.8 * (true - length / 100) + rng.normal(0, 1, len(length))
    out = length_control(predicted, true, length, bootstrap=200)
    assert out["partial_spearman"] > 0.3 and out["partial_spearman_lo"] > 0.2
    assert out["binned_spearman"] > out["baseline_binned_spearman"] + 0.2
    assert out["binned_spearman_lo"] > 0.2
    assert out["spearman_gain_lo"] > 0  # beats the +1/step baseline on the same demos


def test_control_reports_cis_around_each_value_and_no_ci_without_bootstrap():
    rng = np.random.default_rng(6)
    length, true = demos(rng, 200)
    predicted = true + rng.normal(0, 2, 200)
    out = length_control(predicted, true, length, bootstrap=100)
    for key in ("spearman", "partial_spearman", "binned_spearman", "baseline_spearman", "spearman_gain"):
        assert out[f"{key}_lo"] <= out[key] <= out[f"{key}_hi"], key
    bare = length_control(predicted, true, length, bootstrap=0)
    assert bare["partial_spearman"] == out["partial_spearman"] and math.isnan(bare["partial_spearman_lo"])
    with pytest.raises(ValueError, match="differ in length"):
        length_control(predicted[:-1], true, length)
