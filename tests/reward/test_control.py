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
    within_group_partial,
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


def slow_within_checkpoint_partial(p, t, n, g, min_group=3):
    """Per checkpoint: ranks inside it, each of rank(p) and rank(t) residualised on [1, rank(n)] by
    np.linalg.lstsq; the residuals of all checkpoints with >= min_group demos pooled and correlated."""
    res_p, res_t = [], []
    for c in sorted(set(g.tolist())):
        members = [i for i in range(len(g)) if g[i] == c]
        if len(members) < min_group:
            continue
        z = slow_ranks([n[i] for i in members])
        design = np.column_stack([np.ones(len(members)), z])
        for values, out in ((p, res_p), (t, res_t)):
            y = np.array(slow_ranks([values[i] for i in members]))
            coef = np.linalg.lstsq(design, y, rcond=None)[0]
            out.extend((y - design @ coef).tolist())
    return slow_pearson(res_p, res_t)


def checkpoint_demos(rng, per=60, checkpoints=10):
    """Demos of checkpoints whose skill climbs (mean return 3.6 to 7.9, as the starpilot experts'), lengths
    rising with skill and with the return."""
    g = np.repeat(np.arange(checkpoints), per)
    skill = np.linspace(3.6, 7.9, checkpoints)[g]
    true = np.round(skill + rng.normal(0, 2, len(g)))
    length = np.round(rng.normal(100, 30, len(g)) + 6 * skill + 3 * true)
    return g, skill, true, length


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


@pytest.mark.parametrize("seed", [0, 1])
def test_within_checkpoint_partial_matches_least_squares_per_checkpoint(seed):
    rng = np.random.default_rng(seed)
    g, skill, true, length = checkpoint_demos(rng, per=15, checkpoints=5)
    g[-2:] = 7  # a checkpoint of two demos: left out
    predicted = skill + 0.3 * true + rng.normal(0, 1, len(g))
    labels = np.array([f"ckpt-{c}" for c in g])  # any labels
    assert within_group_partial(predicted, true, length, labels) == pytest.approx(
        slow_within_checkpoint_partial(predicted, true, length, g), abs=1e-10
    )
    # one checkpoint: the plain partial Spearman
    one = np.zeros(len(g))
    assert within_group_partial(predicted, true, length, one) == pytest.approx(
        partial_spearman(predicted, true, length), abs=1e-10
    )


def test_binned_gain_is_the_difference_on_the_same_resamples():
    rng = np.random.default_rng(7)
    length, true = demos(rng, 80)
    predicted = true + rng.normal(0, 2, 80)
    out = length_control(predicted, true, length, 5, 5, bootstrap=60, seed=3)
    values = []
    for row in np.random.default_rng(3).integers(0, 80, (60, 80)):
        p, t, n = predicted[row], true[row], length[row]
        values.append(slow_binned_spearman(p, t, n, 5, 5) - slow_binned_spearman(n, t, n, 5, 5))
    assert out["binned_gain"] == pytest.approx(
        out["binned_spearman"] - out["baseline_binned_spearman"], abs=1e-12
    )
    assert out["binned_gain_lo"] == pytest.approx(np.nanpercentile(values, 2.5), abs=1e-10)
    assert out["binned_gain_hi"] == pytest.approx(np.nanpercentile(values, 97.5), abs=1e-10)


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


def test_a_small_binned_gain_is_resolved_by_the_paired_interval_not_by_two_intervals():
    """The model's and the baseline's binned Spearman move together across resamples (the same demos), so
    their intervals overlap although every resample puts the model ahead: reading the two intervals (the
    old report) says nothing, the paired interval of the difference says "better"."""
    rng = np.random.default_rng(8)
    n = 400
    length = rng.integers(50, 300, n).astype(float)
    noise = rng.normal(0, 1, n)
    true = length / 40 + noise
    predicted = length / 40 + 0.03 * noise  # length, and a little of the return beyond it
    out = length_control(predicted, true, length, bootstrap=200)
    assert out["binned_spearman_lo"] < out["baseline_binned_spearman_hi"]  # the two intervals overlap
    assert out["binned_gain_lo"] > 0  # the paired one is above 0
    # a length-only prediction gains nothing within bins
    same = length_control(length + rng.normal(0, 1, n), true, length, bootstrap=200)
    assert same["binned_gain_lo"] < 0 < same["binned_gain_hi"] or same["binned_gain_hi"] < 0


def test_a_reward_that_recognises_the_checkpoint_has_no_partial_within_checkpoint():
    """Skill climbs with the checkpoint; a prediction that knows which checkpoint played (and the length)
    but nothing of the return inside a checkpoint has a large pooled partial given length, which the
    within-checkpoint partial removes; a prediction that tracks the return keeps it."""
    rng = np.random.default_rng(9)
    g, skill, true, length = checkpoint_demos(rng)
    knows_checkpoint = skill + 0.01 * length + rng.normal(0, 0.2, len(g))
    out = length_control(knows_checkpoint, true, length, bootstrap=200, checkpoint=g)
    assert out["partial_spearman"] > 0.3 and out["partial_spearman_lo"] > 0.2  # pooled: "beyond length"
    assert abs(out["checkpoint_partial_spearman"]) < 0.15
    assert out["checkpoint_partial_spearman_lo"] < 0 < out["checkpoint_partial_spearman_hi"]
    tracks_return = 0.01 * length + true + rng.normal(0, 1.5, len(g))
    out = length_control(tracks_return, true, length, bootstrap=200, checkpoint=g)
    assert out["checkpoint_partial_spearman"] > 0.3 and out["checkpoint_partial_spearman_lo"] > 0.2


def test_control_reports_cis_around_each_value_and_no_ci_without_bootstrap():
    rng = np.random.default_rng(6)
    length, true = demos(rng, 200)
    predicted = true + rng.normal(0, 2, 200)
    out = length_control(predicted, true, length, bootstrap=100)
    for key in (
        "spearman",
        "partial_spearman",
        "binned_spearman",
        "baseline_spearman",
        "spearman_gain",
        "binned_gain",
        "checkpoint_partial_spearman",
    ):
        assert out[f"{key}_lo"] <= out[key] <= out[f"{key}_hi"], key
    bare = length_control(predicted, true, length, bootstrap=0)
    assert bare["partial_spearman"] == out["partial_spearman"] and math.isnan(bare["partial_spearman_lo"])
    with pytest.raises(ValueError, match="differ in length"):
        length_control(predicted[:-1], true, length)
