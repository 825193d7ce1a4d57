"""Pearson's and Spearman's correlation, and the average ranks Spearman's is made of.

Spearman's correlation is Pearson's of the average ranks (tied values share the mean of their ranks), as
``scipy.stats.spearmanr``; both are NaN when either side is constant or has fewer than two values (no
spread, no correlation). They are written here in NumPy rather than called from scipy because they run
inside bootstrap loops (T-REX's length control computes some 60,000 rank correlations of a few dozen
demos per evaluation): on such samples ``scipy.stats.spearmanr`` and ``pearsonr`` cost 5 and 20 times
more per call, and the whole control took 3.4 times as long. Their tests hold them to
scipy's values.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def ranks(x: ArrayLike) -> np.ndarray:
    """Ranks 1..n of ``x``, tied values sharing the mean of their ranks (``scipy.stats.rankdata``)."""
    x = np.asarray(x)
    order = np.argsort(x, kind="stable")
    position = np.empty(len(x), np.float64)
    position[order] = np.arange(1, len(x) + 1)
    _, group, counts = np.unique(x, return_inverse=True, return_counts=True)
    group = group.reshape(-1)
    return (np.bincount(group, weights=position) / counts)[group]


def pearson(x: ArrayLike, y: ArrayLike) -> float:
    """Pearson's correlation of ``x`` and ``y`` (1-D, the same length); NaN when either is constant."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"expected two 1-D arrays of the same length, got {x.shape} and {y.shape}")
    if len(x) < 2:
        return float("nan")
    dx, dy = x - x.mean(), y - y.mean()
    denom = np.sqrt((dx * dx).sum() * (dy * dy).sum())
    return float((dx * dy).sum() / denom) if denom > 0 else float("nan")


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman's rank correlation of ``x`` and ``y``: Pearson's of their average ranks."""
    return pearson(ranks(x), ranks(y))
