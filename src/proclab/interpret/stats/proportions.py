"""A share of directions with its interval, and two shares compared, as the sweep and the atlas report
them: how many of a basis's directions matter against how many random directions do.

The share's interval is Wilson's (:func:`proclab.stats.proportions.wilson`), close to its nominal
coverage at the small counts of a sweep (16 directions, a few dozen random ones); two shares are
compared by Newcombe's interval of their difference and Fisher's exact test
(:func:`proclab.stats.proportions.share_difference`).
"""

from __future__ import annotations

from proclab.stats.proportions import share_difference, wilson


def share(successes: int, n: int, level: float = 0.95) -> dict:
    """``{"count", "of", "share", "ci95"}`` of ``successes`` among ``n``."""
    lo, hi = wilson(successes, n, level)
    return {"count": successes, "of": n, "share": successes / n if n else None, "ci95": [lo, hi]}


def compare_shares(a: int, n: int, b: int, m: int, level: float = 0.95) -> dict:
    """Share ``a / n`` against ``b / m``: the difference, Newcombe's interval of it, Fisher's exact p (None
    of each when a side has no direction)."""
    if n == 0 or m == 0:
        return {"difference": None, "ci95": None, "p_fisher": None}
    d = share_difference(a, n, b, m, level)
    return {"difference": d.difference, "ci95": list(d.ci), "p_fisher": d.p}
