"""The exact McNemar test of a binary outcome measured twice on the same units.

A unit (a level, a maze) is played under two conditions and each time succeeds or not. Units that agree
carry no information about a change; of the ``lost + gained`` discordant ones, under "the condition
changes nothing" each is as likely lost (1 -> 0) as gained (0 -> 1), so ``gained`` is binomial(``lost +
gained``, 1/2) and the test is ``scipy.stats.binomtest``'s two-sided exact one (1 with no discordant unit).

A bootstrap over all units is too sure of a change made of a handful of discordant ones: 5 levels gained
of 200, none lost, has a percentile interval that excludes zero, while the exact p is 2 / 2^5 = 0.0625.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats


@dataclass(frozen=True)
class McNemar:
    """Discordant units (``lost``: true then false; ``gained``: false then true) and the exact p-value."""

    lost: int
    gained: int
    p: float


def mcnemar(first: ArrayLike, second: ArrayLike) -> McNemar:
    """Exact McNemar test of paired binary outcomes ``first`` and ``second`` (one pair per unit)."""
    first, second = np.asarray(first, bool), np.asarray(second, bool)
    if first.shape != second.shape:
        raise ValueError(f"paired outcomes differ in shape: {first.shape} and {second.shape}")
    lost, gained = int((first & ~second).sum()), int((~first & second).sum())
    n = lost + gained
    return McNemar(lost, gained, 1.0 if n == 0 else float(stats.binomtest(gained, n, 0.5).pvalue))
