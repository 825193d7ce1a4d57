"""Coordinate systems compared on the same measurements: are IC directions easier to read than units?

The seed's write-up claims that single units of the hidden state are hard to interpret and IC
directions are better. Each system's atlas (``analyze atlas --basis B``, on the same recorded episodes)
and sweep (``analyze sweep --basis B``) already measure every direction the same way, so the
claim becomes three numbers per system, each over its directions:

* **strongest correlate**: per direction, the largest ``|r|`` at lag 0 between its coordinate and any
  quantity the atlas tracks (value, reward, actions, progress, episode ends, the ``gt`` ground truth),
  and the same over the ``gt`` quantities alone; their mean and median over the directions, with
  percentile intervals from resampling directions;
* **ground-truth share**: the share of directions with a ``gt`` quantity tracked (the card's Holm
  correction over its quantities) at ``|r| >= threshold``, with Wilson's interval;
* **sweep share**: where the system was swept, the share of swept directions whose claim ("editing it
  changes return, length or the actions") is significant within the direction (``significant_alone``:
  the across-direction correction is harsher for a system with more directions, and would make it look
  inert for its number alone; the count after that correction is reported beside it), with Wilson's
  interval; and the share whose edit changes *return* (Holm over the direction's on-data arms, within
  the direction: :func:`proclab.interpret.stats.claims.changes`), since with many episodes nearly every
  edit changes the actions detectably and "matters" saturates.

Each system is compared with a reference (``ica`` by default): the difference of the means and medians
with an interval from resampling the two systems' directions independently, and of the shares with
Newcombe's interval and Fisher's exact test (:mod:`proclab.interpret.stats.proportions`). The
comparisons are *unpaired*: an IC and a unit are different objects, and nothing matches a direction of
one system with one of another.
"""

from __future__ import annotations

import numpy as np

from proclab.interpret.stats.claims import changes
from proclab.interpret.stats.proportions import compare_shares, share
from proclab.interpret.sweep.claims import tests_of
from proclab.stats.bootstrap import bootstrap_replicates, interval

GT = "gt "
"""Prefix of the atlas's ground-truth quantities."""
STATISTICS = {"mean": np.mean, "median": np.median}


def strongest(cards: list[dict], ground_truth: bool) -> np.ndarray:
    """Per card, the largest ``|r0|`` among its tracked quantities (only ``gt`` ones with ``ground_truth``);
    0 for a card with none measured."""
    out = []
    for card in cards:
        rs = [
            abs(t["r0"])
            for t in card["tracks"]
            if t["r0"] is not None and (not ground_truth or t["quantity"].startswith(GT))
        ]
        out.append(max(rs, default=0.0))
    return np.array(out, np.float64)


def with_ground_truth(cards: list[dict], threshold: float) -> int:
    """Cards with some ``gt`` quantity tracked (after the card's correction) at ``|r0| >= threshold``."""
    return sum(
        any(
            t["tracked"] and t["quantity"].startswith(GT) and abs(t["r0"]) >= threshold
            for t in card["tracks"]
        )
        for card in cards
    )


def summary_interval(x: np.ndarray, statistic: str, reps: int, seed: int) -> dict:
    """``statistic`` (mean or median) of ``x`` over directions and its percentile interval from ``reps``
    resamples of the directions."""
    fn = STATISTICS[statistic]
    boot = bootstrap_replicates(fn, (x,), reps, seed)
    return {"value": float(fn(x)), "ci95": interval(boot)}


def difference(a: np.ndarray, b: np.ndarray, statistic: str, reps: int, seed: int) -> dict:
    """``statistic(a) - statistic(b)`` for two systems' directions, with the interval of the difference
    of independent resamples of each (unpaired)."""
    fn = STATISTICS[statistic]
    boot_a = bootstrap_replicates(fn, (a,), reps, seed)
    boot_b = bootstrap_replicates(fn, (b,), reps, seed + 1)
    return {"difference": float(fn(a) - fn(b)), "ci95": interval(boot_a - boot_b)}


def sweep_share(sweep: dict | None) -> dict | None:
    """The share of the sweep's swept directions whose claim is significant within the direction, and the
    count after the correction across its directions; None without a sweep or one that held no direction."""
    rows = [] if sweep is None else sweep["claims"]["basis"]
    if not rows:
        return None
    alone = sum(r["significant_alone"] for r in rows)
    alpha = sweep["correction"]["alpha"]
    returns = changes(tests_of(sweep["results"], sweep["claims"]["metrics"]), "return", alpha)
    return {
        **share(alone, len(rows)),
        "changes_return": share(sum(returns.values()), len(rows)),
        "significant_across": sum(r["significant"] for r in rows),
        "levels": len(sweep["levels"]),
        "arms": list(sweep["arms"]),
        "rule": sweep["claims"]["matter"]["rule"],
    }


def measure(atlas: dict, sweep: dict | None, threshold: float, reps: int, seed: int) -> dict:
    """One system's numbers (see the module docstring), from its ``atlas.json`` and ``sweep.json``."""
    cards = atlas["cards"]
    best, best_gt = strongest(cards, False), strongest(cards, True)
    return {
        "label": atlas["label"],
        "directions": len(cards),
        "variance_explained": atlas.get("variance_explained"),
        "strongest_r": {s: summary_interval(best, s, reps, seed) for s in STATISTICS},
        "strongest_gt_r": {s: summary_interval(best_gt, s, reps, seed) for s in STATISTICS},
        "ground_truth": share(with_ground_truth(cards, threshold), len(cards)),
        "sweep": sweep_share(sweep),
        "per_direction": {"strongest_r": best.tolist(), "strongest_gt_r": best_gt.tolist()},
    }


def against(system: dict, reference: dict, reps: int, seed: int) -> dict:
    """``system`` minus ``reference``: the strongest correlates' means and medians, and the shares."""
    out: dict = {}
    for key in ("strongest_r", "strongest_gt_r"):
        a = np.asarray(system["per_direction"][key])
        b = np.asarray(reference["per_direction"][key])
        out[key] = {s: difference(a, b, s, reps, seed) for s in STATISTICS}
    g, h = system["ground_truth"], reference["ground_truth"]
    out["ground_truth"] = compare_shares(g["count"], g["of"], h["count"], h["of"])
    s, r = system["sweep"], reference["sweep"]
    for key, pick in (("sweep", lambda x: x), ("sweep_return", lambda x: x["changes_return"])):
        out[key] = None if s is None or r is None else compare_shares(*_counts(pick(s)), *_counts(pick(r)))
    return out


def _counts(s: dict) -> tuple[int, int]:
    return s["count"], s["of"]
