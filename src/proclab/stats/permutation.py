"""Permutation tests: the p-value of a statistic against its values under permutations of the data.

Under a null that makes some rearrangement of the data equally likely (labels exchangeable between
groups, a unit's two paired outcomes exchangeable), the statistic recomputed on random rearrangements
is a draw from its null distribution. With ``B`` of them, ``p = (1 + #{null >= observed}) / (1 + B)``
(:func:`permutation_p`) counts the observed arrangement as one of the draws: it is never zero and it is
an exact test at any sample size (Phipson and Smyth 2010), where a bootstrap's tails are not.
A statistic that is the same sum in another order can differ from the observed one in its last bits;
``tolerance`` counts such draws as ties.

Paired data are permuted by swapping each unit's two outcomes or not (:func:`sign_flips`). Two small
groups are tested exactly, over every split of the pooled values (:func:`exact_permutation_p`).
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import ArrayLike


def permutation_p(observed: ArrayLike, null: ArrayLike, tolerance: float = 0.0) -> float | np.ndarray:
    """``(1 + #{null >= observed - tolerance}) / (1 + B)`` over the ``B`` permuted statistics along
    ``null``'s first axis, for each of ``observed``'s entries (a float for a scalar statistic). A NaN
    permuted statistic counts as not as large."""
    null = np.asarray(null)
    with np.errstate(invalid="ignore"):
        hits = (null >= np.asarray(observed) - tolerance).sum(0)
    p = (1.0 + hits) / (1.0 + len(null))
    return float(p) if np.ndim(p) == 0 else p


def sign_flips(n: int, reps: int, seed: int) -> np.ndarray:
    """``(reps, n)`` floats, 1 where a permutation swaps unit ``i``'s two paired outcomes (the seed is
    mixed apart from :func:`proclab.stats.bootstrap.resamples`' so the same seed draws independently)."""
    if n < 1:
        raise ValueError("a paired permutation test needs at least one unit")
    return np.random.default_rng([seed, 1]).integers(0, 2, (reps, n)).astype(np.float64)


def exact_permutation_p(a: ArrayLike, b: ArrayLike) -> float:
    """Exact two-sided permutation p of the difference of means of ``a`` and ``b``: the share of all
    ``C(len(a) + len(b), len(a))`` splits of the pooled values into groups of their sizes whose absolute
    difference of means is at least the observed one. Its smallest value is ``2 / C(2n, n)`` for ``n + n``
    values (0.10 for 3 + 3, 0.008 for 5 + 5)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    pooled = np.concatenate([a, b])
    observed = abs(a.mean() - b.mean())
    total = pooled.sum()
    splits = np.asarray(list(itertools.combinations(range(len(pooled)), len(a))))
    first = pooled[splits].sum(1)
    diffs = np.abs(first / len(a) - (total - first) / len(b))
    return float(np.mean(diffs >= observed - 1e-12))
