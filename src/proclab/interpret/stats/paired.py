"""Paired comparisons of a baseline and an intervened agent on the same units: bootstrap CIs and
permutation p-values.

A *unit* is what both arms share: a level (real environment; several episodes of one level are
averaged first) or a bottleneck vector (simulation). Resampling units with replacement keeps
each unit's pair together, so level-to-level variation, which is much larger than most
intervention effects, cancels in the differences. Every CI is the percentile interval of
``reps`` resamples; a change is called significant when its 95 % CI excludes zero.

Frequencies (of actions or behaviours) are ratio estimates: summed counts over the resampled
units divided by their summed totals, so long episodes weigh by their steps, as pooled counts do.

p-values (for corrections over many tests, :mod:`proclab.stats.corrections`) come from the
paired permutation test: under "the edit changes nothing", a unit's two outcomes are
exchangeable, so swapping them in a random subset of units gives the statistic's null
distribution; ``p = (1 + #{permuted >= observed}) / (1 + reps)`` is exact at any number of units
(the bootstrap's tails are not, which matters at the small levels a correction asks for).

Binary outcomes paired by unit (level completed, target reached) are judged by the exact McNemar
test (:func:`binary_change`), corrected across the family reported together (:func:`correct`); the
bootstrap intervals are for continuous outcomes. The statistics themselves (resamples, percentile
intervals, sign flips, permutation p-values, McNemar, corrections) come from :mod:`proclab.stats`; this module
lays out the two arms' comparison as the analyses report it.
"""

from __future__ import annotations

import numpy as np

from proclab.stats.bootstrap import interval, weights
from proclab.stats.corrections import adjust
from proclab.stats.paired import mcnemar
from proclab.stats.permutation import permutation_p, sign_flips

TIE = 1e-9
"""Relative tolerance under which a permuted statistic counts as equal to the observed one (the
same sum in another order)."""


def _interval(base: float, inter: float, boot: np.ndarray) -> dict:
    lo, hi = interval(boot)
    return {
        "baseline": float(base),
        "intervened": float(inter),
        "change": float(inter - base),
        "ci95": [lo, hi],
        "significant": bool(lo > 0 or hi < 0),
    }


def mean_boot(diff: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Resampled means ``(reps,)`` of per-unit differences ``diff`` under weights ``w``."""
    return w @ np.asarray(diff, np.float64) / len(diff)


def mean_change(base: np.ndarray, inter: np.ndarray, idx: np.ndarray) -> dict:
    """Means of a per-unit quantity in each arm and the CI of their difference."""
    base, inter = np.asarray(base, np.float64), np.asarray(inter, np.float64)
    return _interval(base.mean(), inter.mean(), mean_boot(inter - base, weights(idx, len(base))))


def frequencies(counts: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Per-unit counts ``(n, K)`` -> pooled frequencies ``(K,)``, or ``(reps, K)`` under weights ``w``."""
    counts = np.asarray(counts, np.float64)
    return _normalise(counts.sum(0) if w is None else w @ counts)


def frequency_boot(base: np.ndarray, inter: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Resampled changes of the pooled frequencies ``(reps, K)`` and their TV distances ``(reps,)``."""
    change = frequencies(inter, w) - frequencies(base, w)
    return change, 0.5 * np.abs(change).sum(1)


def frequency_changes(base: np.ndarray, inter: np.ndarray, idx: np.ndarray, names: list[str]) -> dict:
    """Per category: pooled frequency in each arm and the CI of the change; plus the total-variation
    distance between the two distributions with its CI (TV is >= 0, so its CI says how large, not
    whether: use the per-category CIs, or :func:`frequency_p`, for significance)."""
    fb, fi = frequencies(base), frequencies(inter)
    change, tv_boot = frequency_boot(base, inter, weights(idx, len(base)))
    out = {name: _interval(fb[k], fi[k], change[:, k]) for k, name in enumerate(names)}
    tv = 0.5 * np.abs(fi - fb).sum()
    return {"per_category": out, "tv_distance": {"value": float(tv), "ci95": interval(tv_boot)}}


def _p(observed: np.ndarray, permuted: np.ndarray) -> np.ndarray:
    """Permutation p-values of statistics ``observed`` (``(...)``) from ``permuted`` (``(reps, ...)``)."""
    return permutation_p(observed, permuted, TIE * np.maximum(1.0, np.abs(observed)))


def mean_p(base: np.ndarray, inter: np.ndarray, s: np.ndarray) -> float:
    """Two-sided p-value of the mean paired difference, from swaps ``s`` (each swap flips a sign)."""
    diff = np.asarray(inter, np.float64) - np.asarray(base, np.float64)
    return float(_p(np.abs(diff.mean()), np.abs((1.0 - 2.0 * s) @ diff / len(diff))))


def frequency_p(base: np.ndarray, inter: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, float]:
    """p-values of the pooled frequency changes ``(K,)`` (two-sided) and of the TV distance."""
    base, inter = np.asarray(base, np.float64), np.asarray(inter, np.float64)
    moved = s @ (inter - base)  # what the swaps take from the intervened arm and give to the baseline
    fi = _normalise(inter.sum(0) - moved)
    fb = _normalise(base.sum(0) + moved)
    observed = frequencies(inter) - frequencies(base)
    p_cat = _p(np.abs(observed), np.abs(fi - fb))
    p_tv = _p(0.5 * np.abs(observed).sum(), 0.5 * np.abs(fi - fb).sum(1))
    return p_cat, float(p_tv)


def _normalise(pooled: np.ndarray) -> np.ndarray:
    return pooled / np.maximum(pooled.sum(-1, keepdims=True), 1e-12)


def binary_change(base: np.ndarray, inter: np.ndarray) -> dict:
    """Shares of a binary per-unit outcome in each arm, their difference and the exact McNemar test
    (:func:`proclab.stats.paired.mcnemar`; no bootstrap interval). ``significant`` is filled in by
    :func:`correct` once the whole family reported together is known."""
    base, inter = np.asarray(base, bool), np.asarray(inter, bool)
    test = mcnemar(base, inter)
    return {
        "baseline": float(base.mean()),
        "intervened": float(inter.mean()),
        "change": float(inter.mean() - base.mean()),
        "lost": test.lost,
        "gained": test.gained,
        "p_exact": test.p,
    }


def against_share(base_share: np.ndarray, inter: np.ndarray, idx: np.ndarray, reps: int, seed: int) -> dict:
    """A binary outcome ``inter`` against the per-unit share ``base_share`` of several control arms that
    reached it (e.g. 20 random channel sets): the bootstrap interval of the difference for its size, and
    for the decision the paired permutation p (each unit's two values swapped at random,
    :func:`mean_p`), which, as McNemar's test does, draws its evidence from the units where the two
    differ; the bootstrap's percentile interval is too sure when those are few."""
    out = mean_change(base_share, inter, idx)
    out.pop("significant")
    return {**out, "p_permutation": mean_p(base_share, inter, sign_flips(len(inter), reps, seed))}


def correct(tests: list[dict], method: str = "holm", alpha: float = 0.05) -> None:
    """Adjust the p-value of every test in ``tests`` (``p_exact``, else ``p_permutation``; one family: what
    is reported together) by ``method`` (:mod:`proclab.stats.corrections`), in place:
    ``p_adjusted``, ``correction`` and ``significant`` (adjusted p at most ``alpha``)."""
    if not tests:
        return
    adjusted = adjust([t["p_exact"] if "p_exact" in t else t["p_permutation"] for t in tests], method)
    for t, p in zip(tests, adjusted, strict=True):
        t.update(p_adjusted=float(p), correction=f"{method} over {len(tests)}", significant=bool(p <= alpha))
