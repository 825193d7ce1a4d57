"""The exact McNemar test of a binary outcome measured twice on the same units.

A unit (a level, a maze) is played under two conditions and each time succeeds or not. Units that agree
carry no information about a change; of the ``lost + gained`` discordant ones, under "the condition
changes nothing" each is as likely lost (1 -> 0) as gained (0 -> 1), so ``gained`` is binomial(``lost +
gained``, 1/2) and the test is ``scipy.stats.binomtest``'s exact one (1 with no discordant unit): two-sided
by default, or one-sided where the question has a direction (``alternative="greater"``: the second condition
succeeds more often than the first; ``"less"``: less often), as a rule that asks whether one condition
*exceeds* another needs.

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


ALTERNATIVES = ("two-sided", "greater", "less")


def mcnemar(first: ArrayLike, second: ArrayLike, alternative: str = "two-sided") -> McNemar:
    """Exact McNemar test of paired binary outcomes ``first`` and ``second`` (one pair per unit);
    ``alternative``: ``"greater"`` tests whether ``second`` succeeds more often than ``first``, ``"less"``
    whether less often (module docstring)."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {', '.join(ALTERNATIVES)}, got {alternative!r}")
    first, second = np.asarray(first, bool), np.asarray(second, bool)
    if first.shape != second.shape:
        raise ValueError(f"paired outcomes differ in shape: {first.shape} and {second.shape}")
    lost, gained = int((first & ~second).sum()), int((~first & second).sum())
    n = lost + gained
    p = 1.0 if n == 0 else float(stats.binomtest(gained, n, 0.5, alternative=alternative).pvalue)
    return McNemar(lost, gained, p)
