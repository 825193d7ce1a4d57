"""Does a learned reward know more than episode length? The length control for T-REX.

In games where surviving longer means scoring more (starpilot), the "+1 per step" reward
already ranks demos by return about as well as T-REX does, so a high Spearman of predicted vs
true return says nothing about whether the learned reward sees anything beyond length. Two
statistics ask that question directly, each with a percentile bootstrap CI over demos:

* **partial Spearman given length**: the Pearson partial correlation of the *ranks* of predicted
  and true return, with the ranks of length partialled out. Zero when, once length is known, the
  prediction says nothing more about the return (up to what a linear fit in ranks cannot
  remove: with a strongly non-linear rank relation a length-only predictor can keep a small
  partial, which the binned statistic does not suffer from).
* **binned Spearman**: demos are put into ``num_bins`` bins of equal count by length (tied
  lengths always share a bin) and Spearman is taken within each bin, then **averaged over bins
  weighted by their number of demos**. Averaging (not pooling the values) is the point: pooling
  predicted and true returns across bins would bring back the between-bin ordering by length,
  the very thing being controlled for; Spearman within a bin is scale-free, so bins whose
  returns lie on different scales count alike, and weighting by size gives every demo the same
  weight. Bins with fewer than ``min_bin`` demos, or where either value is constant, are
  skipped.

Lengths still vary a little inside a bin, so a length-only predictor keeps a small binned
Spearman of its own: the +1/step baseline's binned Spearman (length vs return within the same
bins) is reported beside it as the reference, with the baseline's plain Spearman. Its partial
Spearman is 0 by construction and is not reported. ``binned_gain`` is the model's binned
Spearman minus the baseline's, with a **paired** interval: both come from the same resampled
demos (each demo is its own level), so "ranks better than length within length bins" is read
from one interval of the difference, not from two overlapping ones.

* **partial Spearman given length within checkpoint** (``checkpoint_partial_spearman``): demos
  recorded by several checkpoints of one training run differ in skill by checkpoint, so a reward
  that only recognises *which checkpoint played* (its style, say) ranks demos by return beyond
  length without knowing anything of the return inside one checkpoint's demos. Within each
  checkpoint the ranks of predicted and true return (ranked inside the checkpoint) are
  residualised on the ranks of length by least squares with the checkpoint's own intercept and
  slope; the residuals of all checkpoints are pooled and correlated. Checkpoints with fewer than
  3 demos (in a resample too) are left out; with a single checkpoint it is the partial Spearman.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from proclab.stats.bootstrap import bootstrap_ci
from proclab.stats.correlation import pearson, ranks, spearman

CONTROL_STATS = (
    "spearman",
    "partial_spearman",
    "binned_spearman",
    "baseline_spearman",
    "baseline_binned_spearman",
    "spearman_gain",
    "binned_gain",
    "checkpoint_partial_spearman",
)
"""What :func:`length_control` reports, each with ``_lo``/``_hi`` CI bounds."""


def partial_spearman(predicted, true, length) -> float:
    """Partial correlation of the ranks of ``predicted`` and ``true`` given the ranks of ``length``."""
    x, y, z = (ranks(np.asarray(a, np.float64)) for a in (predicted, true, length))
    r_xy, r_xz, r_yz = pearson(x, y), pearson(x, z), pearson(y, z)
    denom = np.sqrt((1 - r_xz**2) * (1 - r_yz**2))
    return float((r_xy - r_xz * r_yz) / denom) if denom > 1e-12 else float("nan")


def within_group_partial(predicted, true, length, group, min_group: int = 3) -> float:
    """Partial Spearman of ``predicted`` and ``true`` given ``length`` inside each ``group`` (a checkpoint),
    residuals pooled (module docstring). Groups of fewer than ``min_group`` rows are left out."""
    group = np.unique(np.asarray(group), return_inverse=True)[1].reshape(-1)
    counts = np.bincount(group)
    keep = counts[group] >= min_group
    group = np.unique(group[keep], return_inverse=True)[1].reshape(-1)
    counts = np.bincount(group)
    residuals = []
    z = _ranks_within(np.asarray(length, np.float64)[keep], group)
    z = z - (np.bincount(group, z) / counts)[group]
    zz = np.bincount(group, z * z)
    for values in (predicted, true):
        x = _ranks_within(np.asarray(values, np.float64)[keep], group)
        x = x - (np.bincount(group, x) / counts)[group]
        slope = np.divide(np.bincount(group, x * z), zz, out=np.zeros_like(zz), where=zz > 0)
        residuals.append(x - slope[group] * z)
    return pearson(*residuals) if len(residuals[0]) > 2 else float("nan")


def _ranks_within(x: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Average ranks of ``x`` inside each group (ties share their mean rank)."""
    out = np.empty(len(x))
    for g in np.unique(group):
        inside = group == g
        out[inside] = ranks(x[inside])
    return out


def length_bins(length, num_bins: int) -> np.ndarray:
    """Bin ``0..num_bins-1`` of each demo: equal-count bins by length, tied lengths in one bin
    (a demo's bin comes from its average rank, which ties share)."""
    length = np.asarray(length)
    rank = ranks(length)
    return np.minimum(((rank - 1) * num_bins / len(length)).astype(np.int64), num_bins - 1)


def binned_spearman(predicted, true, length, num_bins: int = 10, min_bin: int = 5) -> float:
    """Spearman of ``predicted`` vs ``true`` within length bins, averaged weighted by bin size."""
    predicted, true = np.asarray(predicted, np.float64), np.asarray(true, np.float64)
    bins = length_bins(length, num_bins)
    values, weights = [], []
    for b in np.unique(bins):
        inside = bins == b
        if inside.sum() < min_bin:
            continue
        rho = spearman(predicted[inside], true[inside])
        if np.isfinite(rho):
            values.append(rho)
            weights.append(inside.sum())
    return float(np.average(values, weights=weights)) if values else float("nan")


def length_control(
    predicted,
    true,
    length,
    num_bins: int = 10,
    min_bin: int = 5,
    bootstrap: int = 1000,
    seed: int = 0,
    checkpoint=None,
) -> dict[str, Any]:
    """Spearman, partial Spearman given length and binned Spearman of a reward model's predicted
    returns, and the +1/step baseline's Spearman and binned Spearman on the same demos, each with
    ``_lo``/``_hi`` bounds of a 95% bootstrap CI (``bootstrap`` resamples; 0: no CI, NaN bounds).
    ``spearman_gain`` and ``binned_gain`` are the model's Spearman and binned Spearman minus the
    baseline's, their CIs from the same resamples (paired). ``checkpoint`` (per demo, any labels;
    default: one checkpoint) gives ``checkpoint_partial_spearman``, the partial given length within
    checkpoint."""
    arrays = tuple(np.asarray(a, np.float64) for a in (predicted, true, length))
    group = np.zeros(len(arrays[0]), np.int64) if checkpoint is None else np.asarray(checkpoint)
    group = np.unique(group, return_inverse=True)[1].reshape(-1).astype(np.float64)
    if not len(arrays[0]) == len(arrays[1]) == len(arrays[2]) == len(group):
        raise ValueError(
            f"predicted, true, length and checkpoint differ in length: {[len(a) for a in (*arrays, group)]}"
        )
    arrays = (*arrays, group)

    def binned(p, t, n):
        return binned_spearman(p, t, n, num_bins, min_bin)

    stats = {
        "spearman": lambda p, t, n, g: spearman(p, t),
        "partial_spearman": lambda p, t, n, g: partial_spearman(p, t, n),
        "binned_spearman": lambda p, t, n, g: binned(p, t, n),
        "baseline_spearman": lambda p, t, n, g: spearman(n, t),
        "baseline_binned_spearman": lambda p, t, n, g: binned(n, t, n),
        "spearman_gain": lambda p, t, n, g: spearman(p, t) - spearman(n, t),
        "binned_gain": lambda p, t, n, g: binned(p, t, n) - binned(n, t, n),
        "checkpoint_partial_spearman": within_group_partial,
    }
    assert tuple(stats) == CONTROL_STATS
    out: dict[str, float] = {}
    for name, stat in stats.items():
        out[name] = stat(*arrays)
        lo, hi = (
            bootstrap_ci(stat, arrays, bootstrap, seed) if bootstrap > 0 else (float("nan"), float("nan"))
        )
        out[f"{name}_lo"], out[f"{name}_hi"] = lo, hi
    out["length_bins"] = num_bins
    out["control_demos"] = len(arrays[0])
    return out
