"""Paired bootstrap comparisons of a baseline and an intervened agent on the same units.

A *unit* is what both arms share: a level (real environment; several episodes of one level are
averaged first) or a bottleneck vector (simulation). Resampling units with replacement keeps
each unit's pair together, so level-to-level variation, which is much larger than most
intervention effects, cancels in the differences. Every CI is the percentile interval of
``reps`` resamples; a change is called significant when its 95 % CI excludes zero.

Frequencies (of actions or behaviours) are ratio estimates: summed counts over the resampled
units divided by their summed totals, so long episodes weigh by their steps, as pooled counts do.
"""

from __future__ import annotations

import numpy as np


def resamples(n: int, reps: int, seed: int) -> np.ndarray:
    """``(reps, n)`` unit indices drawn with replacement (one draw shared by every statistic)."""
    if n < 1:
        raise ValueError("a paired bootstrap needs at least one unit")
    return np.random.default_rng(seed).integers(0, n, (reps, n))


def _interval(base: float, inter: float, boot: np.ndarray) -> dict:
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return {
        "baseline": float(base),
        "intervened": float(inter),
        "change": float(inter - base),
        "ci95": [float(lo), float(hi)],
        "significant": bool(lo > 0 or hi < 0),
    }


def mean_change(base: np.ndarray, inter: np.ndarray, idx: np.ndarray) -> dict:
    """Means of a per-unit quantity in each arm and the CI of their difference."""
    base, inter = np.asarray(base, np.float64), np.asarray(inter, np.float64)
    diff = inter - base
    return _interval(base.mean(), inter.mean(), diff[idx].mean(1))


def frequencies(counts: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
    """Per-unit counts ``(n, K)`` -> pooled frequencies ``(K,)``, or ``(reps, K)`` over resamples ``idx``."""
    counts = np.asarray(counts, np.float64)
    pooled = counts.sum(0) if idx is None else counts[idx].sum(1)
    return pooled / np.maximum(pooled.sum(-1, keepdims=True), 1e-12)


def frequency_changes(base: np.ndarray, inter: np.ndarray, idx: np.ndarray, names: list[str]) -> dict:
    """Per category: pooled frequency in each arm and the CI of the change; plus the total-variation
    distance between the two distributions with its CI (TV is >= 0, so its CI says how large, not
    whether: use the per-category CIs for significance)."""
    fb, fi = frequencies(base), frequencies(inter)
    bb, bi = frequencies(base, idx), frequencies(inter, idx)
    out = {name: _interval(fb[k], fi[k], bi[:, k] - bb[:, k]) for k, name in enumerate(names)}
    tv = 0.5 * np.abs(fi - fb).sum()
    lo, hi = np.percentile(0.5 * np.abs(bi - bb).sum(1), [2.5, 97.5])
    return {"per_category": out, "tv_distance": {"value": float(tv), "ci95": [float(lo), float(hi)]}}
