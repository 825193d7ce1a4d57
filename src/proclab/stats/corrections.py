"""Corrections for many tests at once: Holm (family-wise error) and Benjamini-Hochberg (false discovery
rate), as adjusted p-values, and the confidence level of the intervals that go with them.

With ``m`` tests at level ``alpha``, a test is significant when its adjusted p-value is at most
``alpha``. Holm's step-down procedure keeps the chance of *any* false positive at most ``alpha``
under every dependence between the tests; Benjamini-Hochberg keeps the expected share of false
positives among the significant ones at most ``alpha`` (for independent or positively dependent
tests), and is the more powerful when many tests have effects. When no test has an effect the two
coincide: the chance of any significant one is at most ``alpha``. Benjamini-Hochberg is
``scipy.stats.false_discovery_control``; scipy has no Holm, which is written out here.

Intervals: after Holm, each interval is reported at level ``1 - alpha / m`` (Bonferroni: all ``m``
cover together with probability ``1 - alpha``); after Benjamini-Hochberg at ``1 - R alpha / m``
with ``R`` the number of significant tests (at least one), the false-coverage-rate adjusted
intervals of Benjamini and Yekutieli (2005).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from proclab.errors import unknown_choice

CORRECTIONS = {"holm": "Holm (family-wise error rate)", "bh": "Benjamini-Hochberg (false discovery rate)"}


def holm(p: ArrayLike) -> np.ndarray:
    """Holm-adjusted p-values: sorted ascending, ``max_{j <= i} (m - j) p_(j)`` (0-based), capped at 1."""
    p = np.asarray(p, np.float64)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out


def benjamini_hochberg(p: ArrayLike) -> np.ndarray:
    """BH-adjusted p-values (q-values): sorted ascending, ``min_{j >= i} m p_(j) / (j + 1)``, capped at 1."""
    p = np.asarray(p, np.float64)
    return stats.false_discovery_control(p) if len(p) else np.empty(0)


def adjust(p: ArrayLike, method: str) -> np.ndarray:
    """Adjusted p-values by ``method`` (``holm`` or ``bh``)."""
    if method == "holm":
        return holm(p)
    if method == "bh":
        return benjamini_hochberg(p)
    raise unknown_choice("correction", method, CORRECTIONS)


def interval_level(method: str, alpha: float, m: int, significant: int) -> float:
    """Confidence level of the corrected intervals of a family of ``m`` tests (see the module docstring)."""
    if method not in CORRECTIONS:
        raise unknown_choice("correction", method, CORRECTIONS)
    share = 1 if method == "holm" else max(1, significant)
    return 1.0 - share * alpha / m
