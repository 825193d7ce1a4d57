"""How good a learned reward is: correlation of predicted with true returns, and pair accuracy.

The headline metric (as in the procedural-generalization study) is the Pearson and Spearman
correlation, across demos from held-out levels, between the true return and the predicted one
(the learned per-frame reward summed over the demo). It is always reported beside the trivial
"+1 per step" reward model, whose predicted return is the episode length: in games like
starpilot, where surviving longer means scoring more, that baseline is already near 0.96.

Written in NumPy (scipy is not a proclab dependency); ties get average ranks, as in
``scipy.stats.spearmanr``, and a constant input gives NaN.
"""

from __future__ import annotations

import numpy as np


def pearson(x, y) -> float:
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"expected two 1-D arrays of the same length, got {x.shape} and {y.shape}")
    dx, dy = x - x.mean(), y - y.mean()
    denom = np.sqrt((dx * dx).sum() * (dy * dy).sum())
    return float((dx * dy).sum() / denom) if denom > 0 else float("nan")


def average_ranks(x) -> np.ndarray:
    """Ranks 1..n, tied values sharing the mean of their ranks."""
    x = np.asarray(x)
    order = np.argsort(x, kind="stable")
    position = np.empty(len(x), np.float64)
    position[order] = np.arange(1, len(x) + 1)
    _, group, counts = np.unique(x, return_inverse=True, return_counts=True)
    return (np.bincount(group, weights=position) / counts)[group]


def spearman(x, y) -> float:
    return pearson(average_ranks(x), average_ranks(y))


def correlations(predicted, true, lengths) -> dict[str, float]:
    """Pearson/Spearman of predicted vs true returns, and of the +1/step baseline (lengths)."""
    return {
        "pearson": pearson(predicted, true),
        "spearman": spearman(predicted, true),
        "baseline_pearson": pearson(lengths, true),
        "baseline_spearman": spearman(lengths, true),
    }


def pair_accuracy(returns: np.ndarray) -> float:
    """Share of clip pairs ``(worse, better)`` (rows of ``returns``) ranked right; a tie counts half."""
    returns = np.asarray(returns)
    return float(np.mean((returns[:, 1] > returns[:, 0]) + 0.5 * (returns[:, 1] == returns[:, 0])))
