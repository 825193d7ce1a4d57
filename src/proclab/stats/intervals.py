"""A confidence interval as one typed pair: every statistic here that has an interval returns this.

A named tuple rather than a dataclass so that it unpacks (``lo, hi = wilson(3, 10)``), indexes, and is
written to JSON as the ``[low, high]`` list that proclab's reports have always held.
"""

from __future__ import annotations

from typing import NamedTuple


class Interval(NamedTuple):
    """Lower and upper bounds of a confidence interval."""

    low: float
    high: float
