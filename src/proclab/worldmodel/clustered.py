"""Statistics over windows that share episodes: means with episode-clustered intervals, AUC (with an
episode-clustered bootstrap interval), correlations.

Windows cut from one episode overlap and see the same level, so their errors are not independent:
an interval that treats every window as a draw is too narrow by roughly the square root of the
windows per episode. The unit of replication is the episode, so intervals here are
**cluster-robust** (the sandwich variance with the small-sample factor ``G / (G - 1)``, ``G``
episodes, and a Student t quantile with ``G - 1`` degrees of freedom)::

    mean = sum_i x_i / n,   var = G / (G - 1) * sum_g (sum_{i in g} (x_i - mean))^2 / n^2

With one window per episode this is exactly the usual ``s / sqrt(n)`` interval. A paired
difference (the model against a baseline on the same windows) is the same estimator applied to
the per-window differences, so the shared difficulty of a window cancels before the interval.

They are laid out as the world model's evaluation reports them; the cluster bootstrap, the ranks and the
correlations are :mod:`proclab.stats`'.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from proclab.stats.bootstrap import bootstrap_ci
from proclab.stats.correlation import pearson, ranks, spearman


def clustered_mean(values: np.ndarray, clusters: np.ndarray, level: float = 0.95) -> dict:
    """``{"mean", "ci95", "n", "clusters"}`` of ``values`` (NaNs dropped) with the episode-clustered interval.

    ``ci95`` is None when fewer than two clusters remain (no spread to estimate); ``mean`` is None
    when nothing remains.
    """
    values, clusters = np.asarray(values, np.float64), np.asarray(clusters)
    keep = ~np.isnan(values)
    x, g = values[keep], clusters[keep]
    if len(x) == 0:
        return {"mean": None, "ci95": None, "n": 0, "clusters": 0}
    mean = float(x.mean())
    labels, index = np.unique(g, return_inverse=True)
    G = len(labels)
    if G < 2:
        return {"mean": mean, "ci95": None, "n": len(x), "clusters": G}
    sums = np.bincount(index, weights=x - mean, minlength=G)
    se = np.sqrt(G / (G - 1) * np.square(sums).sum()) / len(x)
    half = float(stats.t.ppf(0.5 + level / 2, G - 1) * se)
    return {"mean": mean, "ci95": [mean - half, mean + half], "n": len(x), "clusters": G}


def auc(scores: np.ndarray, labels: np.ndarray) -> float | None:
    """Area under the ROC curve: the chance that a random positive scores above a random negative (ties
    count one half), from the ranks (Mann-Whitney U). None without both classes."""
    scores, labels = np.asarray(scores, np.float64), np.asarray(labels, bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    rank = ranks(scores)  # average ranks: ties count one half
    u = rank[labels].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_pos * n_neg))


def clustered_auc(
    scores: np.ndarray,
    labels: np.ndarray,
    clusters: np.ndarray,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """``{"auc", "ci95", "positives", "negatives", "clusters"}``: :func:`auc` with a percentile bootstrap
    interval over *clusters* (episodes drawn with replacement, all their windows kept): windows of one
    episode share its outcome, so resampling windows would count each episode's coin many times over and
    give an interval too narrow. Resamples without both classes are left out; ``ci95`` is None with fewer
    than two clusters."""
    scores, labels, clusters = np.asarray(scores, np.float64), np.asarray(labels, bool), np.asarray(clusters)
    names = np.unique(clusters)
    out = {
        "auc": auc(scores, labels),
        "ci95": None,
        "positives": int(labels.sum()),
        "negatives": int((~labels).sum()),
        "clusters": len(names),
    }
    if out["auc"] is None or len(names) < 2:
        return out
    ci = bootstrap_ci(_auc_or_nan, (scores, labels), resamples, seed, level, clusters=clusters)
    if np.isfinite(ci.low):
        out["ci95"] = list(ci)
    return out


def _auc_or_nan(scores: np.ndarray, labels: np.ndarray) -> float:
    """:func:`auc`, NaN for a resample without both classes (which the bootstrap leaves out)."""
    value = auc(scores, labels)
    return float("nan") if value is None else value


def correlations(x: np.ndarray, y: np.ndarray) -> dict:
    """Pearson's and Spearman's correlation of ``x`` and ``y`` (None where either is constant)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"pearson": None, "spearman": None, "n": len(x)}
    return {
        "pearson": pearson(x, y),
        "spearman": spearman(x, y),
        "n": len(x),
    }
