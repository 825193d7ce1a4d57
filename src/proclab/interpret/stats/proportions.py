"""A share of directions with its interval, and two shares compared: how many of a basis's directions
matter against how many random directions do.

Wilson's score interval (Wilson 1927) keeps close to its nominal coverage at the small counts of a
sweep (16 directions, a few dozen random ones), where the normal interval is too narrow near 0 and
1 (the exact Clopper-Pearson interval, :func:`proclab.envs.episodes.clopper_pearson`, where a report
promises exact ones). Two
shares are compared by Fisher's exact test (two-sided) and Newcombe's hybrid-score interval
of their difference (Newcombe 1998, method 10), built from the two Wilson intervals.
"""

from __future__ import annotations

import math

from scipy import stats


def wilson(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of the share ``successes / n``; ``(0, 1)`` when ``n == 0``."""
    if n == 0:
        return 0.0, 1.0
    z = float(stats.norm.ppf(0.5 + level / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def share(successes: int, n: int, level: float = 0.95) -> dict:
    """``{"count", "of", "share", "ci95"}`` of ``successes`` among ``n``."""
    lo, hi = wilson(successes, n, level)
    return {"count": successes, "of": n, "share": successes / n if n else None, "ci95": [lo, hi]}


def compare_shares(a: int, n: int, b: int, m: int, level: float = 0.95) -> dict:
    """Share ``a / n`` against ``b / m``: the difference, Newcombe's interval of it, Fisher's exact p."""
    if n == 0 or m == 0:
        return {"difference": None, "ci95": None, "p_fisher": None}
    p1, p2 = a / n, b / m
    l1, u1 = wilson(a, n, level)
    l2, u2 = wilson(b, m, level)
    d = p1 - p2
    lo = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    hi = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    p = float(stats.fisher_exact([[a, n - a], [b, m - b]]).pvalue)
    return {"difference": d, "ci95": [lo, hi], "p_fisher": p}
