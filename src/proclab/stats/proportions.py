"""A share of successes with its confidence interval, and two shares compared.

Two intervals, both from ``scipy.stats.binomtest(k, n).proportion_ci``:

* **exact** (Clopper-Pearson 1934): covers the true share at least ``level`` of the time for every share
  and every ``n``, also at 0 or ``n`` successes and at the few dozen episodes an evaluation often has,
  where the normal (Wald) interval fails. It is the one a report that promises coverage gives.
* **Wilson** (1927) score interval: narrower, close to its nominal coverage on average at small counts
  (a sweep's 16 directions), though below it for shares near 0 and 1.

With no trial at all nothing is excluded: the interval is ``(0, 1)`` (scipy asks for ``n >= 1``).

Two shares ``a / n`` and ``b / m`` are compared by their difference with Newcombe's hybrid score
interval (Newcombe 1998, method 10, built from the two Wilson intervals; scipy has none) and Fisher's
exact test, two-sided.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from proclab.errors import unknown_choice
from proclab.stats.intervals import Interval

METHODS = {"exact": "Clopper-Pearson (exact)", "wilson": "Wilson score"}


def clopper_pearson(successes: int, n: int, level: float = 0.95) -> Interval:
    """The exact (Clopper-Pearson) interval of the share ``successes / n``; ``(0, 1)`` when ``n == 0``."""
    return _interval(successes, n, level, "exact")


def wilson(successes: int, n: int, level: float = 0.95) -> Interval:
    """Wilson's score interval of the share ``successes / n``; ``(0, 1)`` when ``n == 0``."""
    return _interval(successes, n, level, "wilson")


def _interval(successes: int, n: int, level: float, method: str) -> Interval:
    if n == 0:
        return Interval(0.0, 1.0)
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence_level=level, method=method)
    return Interval(float(ci.low), float(ci.high))


@dataclass(frozen=True)
class Proportion:
    """How many of ``of`` trials succeeded, their share (None of none) and its interval."""

    count: int
    of: int
    share: float | None
    ci: Interval
    method: str
    level: float


def proportion(outcomes: ArrayLike, *, method: str = "exact", level: float = 0.95) -> Proportion:
    """The share of true ``outcomes`` (booleans, one per trial: an episode, a level) with its interval,
    exact (Clopper-Pearson) unless ``method="wilson"``."""
    if method not in METHODS:
        raise unknown_choice("interval method", method, METHODS)
    outcomes = np.asarray(outcomes, bool)
    count, n = int(outcomes.sum()), int(outcomes.size)
    ci = _interval(count, n, level, method)
    return Proportion(count, n, count / n if n else None, ci, method, level)


@dataclass(frozen=True)
class ShareDifference:
    """``a / n - b / m`` with Newcombe's interval and Fisher's exact two-sided p-value."""

    difference: float
    ci: Interval
    p: float


def share_difference(a: int, n: int, b: int, m: int, level: float = 0.95) -> ShareDifference:
    """Share ``a / n`` against share ``b / m`` (independent samples): their difference, Newcombe's hybrid
    score interval of it and Fisher's exact test."""
    if n == 0 or m == 0:
        raise ValueError(f"comparing shares needs a trial on each side, got {n} and {m}")
    p1, p2 = a / n, b / m
    l1, u1 = wilson(a, n, level)
    l2, u2 = wilson(b, m, level)
    d = p1 - p2
    lo = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    hi = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    # scipy annotates fisher_exact's result with none of its fields; it is a SignificanceResult
    p = float(stats.fisher_exact([[a, n - a], [b, m - b]]).pvalue)  # pyright: ignore[reportAttributeAccessIssue]
    return ShareDifference(d, Interval(lo, hi), p)
