"""Corrections at the level of a claim: "direction ``m`` matters", tested over all its arms and metrics.

A sweep tests every (direction, arm, metric). Correcting only within one arm and one metric over the
directions (one *family* per arm x metric) keeps each family's error rate at ``alpha``, but a
direction that is called significant when *any* of its families is gets ``arms x metrics`` chances:
with 5 arms and 3 metrics a null direction is flagged far more often than ``alpha``. The unit a study
reports is the claim, so the correction is made there, in two steps:

1. **Within a direction** its ``n`` tests (arms x metrics) are combined by Holm's procedure. The
   claim's p-value is Holm's first step, ``min(1, n min_j p_j)``: the Bonferroni test of the
   intersection "no arm changes any metric", valid under every dependence between the tests (the
   arms and metrics of one direction are strongly dependent, which makes it conservative, never
   anti-conservative). A direction's claim is therefore false-positive at most ``alpha`` of the time.
2. **Across directions** the claims' p-values form the family, adjusted by Holm (family-wise) or
   Benjamini-Hochberg (false discovery rate), :mod:`proclab.stats.corrections`.

For a significant claim, ``carried_by`` lists the (arm, metric) tests whose within-direction
Holm-adjusted p-value is at most ``alpha``: which edits carry the claim (their error rate is held
within the direction, not across directions). Metrics that are the same test, such as return and
level completion in a game whose only reward is the level's end, are counted once by the caller
(:func:`proclab.interpret.sweep.stats.claim_metrics`).

A claim about one metric ("editing it changes return") is the same test on that metric's arms alone
(:func:`changes`): with many episodes almost every edit changes *some* metric (the actions' TV above
all), so "matters" saturates while "changes return" still separates directions.
"""

from __future__ import annotations

import numpy as np

from proclab.stats.corrections import adjust, holm


def claim_p(p_values) -> float:
    """The p-value of "none of these tests' nulls is false": Holm's first step, ``min(1, n min p)``."""
    p = np.asarray(p_values, np.float64)
    return float(min(1.0, len(p) * p.min()))


def claims(tests: dict[int, dict[tuple[str, str], float]], correction: str, alpha: float) -> dict[int, dict]:
    """Per direction (``tests[m]``: its p-value per (arm, metric)): the claim's p-value, adjusted over the
    directions by ``correction``, whether it is significant, and the tests that carry it."""
    directions = list(tests)
    if not directions:
        return {}
    raw = [claim_p(list(tests[m].values())) for m in directions]
    adjusted = adjust(raw, correction)
    out = {}
    for m, p, q in zip(directions, raw, adjusted, strict=True):
        keys = list(tests[m])
        within = holm([tests[m][k] for k in keys])
        significant = bool(q <= alpha)
        carried = [
            {"arm": arm, "metric": metric, "p": tests[m][arm, metric], "p_within": float(w)}
            for (arm, metric), w in zip(keys, within, strict=True)
            if significant and w <= alpha
        ]
        carried.sort(key=lambda c: c["p_within"])
        out[m] = {
            "tests": len(keys),
            "p": p,
            "p_adjusted": float(q),
            "significant": significant,
            "significant_alone": bool(p <= alpha),
            "carried_by": carried,
        }
    return out


def changes(tests: dict[int, dict[tuple[str, str], float]], metric: str, alpha: float) -> dict[int, bool]:
    """Per direction, whether editing it changes ``metric``: Holm's first step over the direction's arms'
    tests of that metric, at ``alpha`` within the direction (as ``significant_alone``); False for a
    direction with no test of it."""
    out = {}
    for m, t in tests.items():
        p = [v for (_, met), v in t.items() if met == metric]
        out[m] = bool(p) and claim_p(p) <= alpha
    return out
