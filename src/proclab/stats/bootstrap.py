"""Percentile bootstrap intervals, resampling rows or whole clusters of rows, with reproducible draws.

A resample draws ``n`` of the ``n`` units with replacement; a statistic computed on each of ``reps``
resamples gives its bootstrap replicates, and the percentile interval at ``level`` is their
``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles (numpy's linear interpolation).

**The unit.** Rows that share something (the steps of one episode, the arms of one direction, the windows
cut from one episode) are not independent draws; resampling rows would make the interval too narrow by
about the square root of the rows per unit. :func:`cluster_resamples` draws whole clusters with
replacement, each with all its rows (the episode bootstrap).

**The draws.** Every resample of ``n`` units is ``np.random.default_rng(seed).integers(0, n, (reps, n))``,
one draw for all resamples (numpy's generator gives the same numbers drawn row by row, so a loop that
draws one resample at a time from the same generator is this too). A seed that is an integer gives
every caller with that seed the same resamples, so statistics computed from one draw are paired (a
difference of two statistics has the interval of its own replicates); a ``np.random.Generator`` is drawn
from where it stands, for a caller that shares one generator between several uses.

**Weights.** A resampled sum is a matrix product with the count of each unit in each resample
(:func:`weights`), the fast path for sums, means and every statistic made of them; a statistic that is not
(a rank correlation, a refitted model) is recomputed on each resample's rows (:func:`bootstrap_replicates`).

scipy's ``scipy.stats.bootstrap`` draws its resamples its own way (and has no cluster resampling), so it
could not give the intervals proclab has reported with the same seeds; its default BCa interval is
another interval.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence

import numpy as np
from numpy.typing import ArrayLike

from proclab.stats.intervals import Interval

Seed = int | Sequence[int] | np.random.Generator


def resamples(n: int, reps: int, seed: Seed) -> np.ndarray:
    """``(reps, n)`` unit indices drawn with replacement (one draw shared by every statistic)."""
    if n < 1:
        raise ValueError("a bootstrap needs at least one unit")
    return np.random.default_rng(seed).integers(0, n, (reps, n))


def weights(idx: np.ndarray, n: int) -> np.ndarray:
    """Resample indices ``(reps, n)`` -> how often each unit was drawn, ``(reps, n)`` floats (a
    resampled sum is then one matrix product)."""
    reps = len(idx)
    flat = (idx + n * np.arange(reps)[:, None]).ravel()
    return np.bincount(flat, minlength=reps * n).reshape(reps, n).astype(np.float64)


def cluster_rows(labels: ArrayLike) -> list[np.ndarray]:
    """The rows of each cluster (labels in sorted order, rows ascending), from one label per row."""
    _, index, counts = np.unique(np.asarray(labels), return_inverse=True, return_counts=True)
    return np.split(np.argsort(index.reshape(-1), kind="stable"), np.cumsum(counts)[:-1])


def cluster_resamples(labels: ArrayLike, reps: int, seed: Seed) -> Iterator[np.ndarray]:
    """Row indices of ``reps`` resamples of whole clusters (``labels``: one per row), each cluster drawn
    with all its rows; the clusters are drawn as :func:`resamples` draws units."""
    members = cluster_rows(labels)
    for draw in resamples(len(members), reps, seed):
        yield np.concatenate([members[g] for g in draw])


def bootstrap_replicates(
    statistic: Callable[..., float | np.ndarray],
    arrays: tuple[np.ndarray, ...],
    reps: int,
    seed: Seed,
    *,
    clusters: np.ndarray | None = None,
) -> np.ndarray:
    """``statistic(*arrays)`` on each of ``reps`` resamples of the rows of ``arrays`` (of the clusters
    ``clusters``, one label per row, when given): ``(reps, ...)``."""
    n = len(arrays[0])
    rows = resamples(n, reps, seed) if clusters is None else cluster_resamples(clusters, reps, seed)
    return np.array([statistic(*(a[r] for a in arrays)) for r in rows])


def percentile_interval(
    boot: np.ndarray, level: float = 0.95, axis: int = -1, skip_nan: bool = False
) -> np.ndarray:
    """The percentile interval of bootstrap replicates ``boot`` along ``axis`` at confidence ``level``: lower
    and upper bounds stacked first, ``(2, ...)``. ``skip_nan`` leaves NaN replicates out (a resample in
    which a quantity is constant has no correlation) and gives NaN where every replicate is NaN."""
    tail = 50.0 * (1.0 - level)
    if not skip_nan:
        return np.percentile(boot, [tail, 100.0 - tail], axis=axis)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: the interval is NaN
        return np.nanpercentile(boot, [tail, 100.0 - tail], axis=axis)


def interval(boot: np.ndarray, level: float = 0.95) -> list:
    """The percentile interval ``[lo, hi]`` of bootstrap replicates ``boot`` (``(reps,)``) at confidence
    ``level``, as a report writes it; of a ``(tests, reps)`` array, the list of each row's."""
    lo, hi = percentile_interval(boot, level)
    if np.ndim(boot) == 1:
        return [float(lo), float(hi)]
    return [[float(a), float(b)] for a, b in zip(lo, hi, strict=True)]


def bootstrap_ci(
    statistic: Callable[..., float],
    arrays: tuple[np.ndarray, ...],
    reps: int,
    seed: Seed,
    level: float = 0.95,
    *,
    clusters: np.ndarray | None = None,
) -> Interval:
    """Percentile bootstrap interval of ``statistic(*arrays)`` over resampled rows (or whole clusters of
    rows, ``clusters``); resamples where the statistic is undefined (NaN) are left out, and the interval
    is NaN when none is left."""
    values = bootstrap_replicates(statistic, arrays, reps, seed, clusters=clusters)
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return Interval(float("nan"), float("nan"))
    lo, hi = percentile_interval(values, level)
    return Interval(float(lo), float(hi))
