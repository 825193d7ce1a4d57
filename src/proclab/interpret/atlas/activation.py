"""What activates a direction: its extreme moments, how often it is active, its tails, and when it fires.

Over every analysed step (``c``: one coordinate's values, rows of the concatenated episodes):

* **moments**: the top (bottom) moments are the steps with the highest (lowest) value, at most one
  per episode (the episode's own extreme), so ``n`` moments show ``n`` different episodes rather
  than ``n`` neighbouring steps of one; ties go to the earlier row;
* **active**: a non-negative code (a sparse atom, an NMF component) is active where it is above
  zero; any other coordinate where it lies more than ``sigma`` (2) standard deviations from its
  median, on either side (``active_high`` and ``active_low`` say which);
* **kurtosis**: excess kurtosis ``m4 / m2^2 - 3`` (0 for a Gaussian; large for a direction that is
  quiet on most steps and far out on a few, the ICA contrast);
* **progress**: a histogram of episode progress ``t / (T - 1)`` over the active steps (``active``),
  beside the same over all steps (``all``), so a direction that fires at the end of episodes shows
  its mass in the last bins whatever the episodes' lengths.
"""

from __future__ import annotations

import numpy as np

SIGMA = 2.0
BINS = 10


def active_mask(c: np.ndarray, nonnegative: bool, sigma: float = SIGMA) -> tuple[np.ndarray, dict]:
    """Which steps are active, and the rule's numbers (threshold, shares)."""
    c = np.asarray(c, np.float64)
    if nonnegative:
        mask = c > 0
        return mask, {"rule": "above 0", "threshold": 0.0, "active": float(mask.mean())}
    med, sd = float(np.median(c)), float(c.std())
    high, low = c > med + sigma * sd, c < med - sigma * sd
    rule = f"more than {sigma:g} std from the median"
    return high | low, {
        "rule": rule,
        "threshold": sigma * sd,
        "median": med,
        "active": float((high | low).mean()),
        "active_high": float(high.mean()),
        "active_low": float(low.mean()),
    }


def excess_kurtosis(c: np.ndarray) -> float:
    """``m4 / m2^2 - 3`` with central moments (biased, as scipy's default); NaN for a constant."""
    d = np.asarray(c, np.float64) - np.mean(c)
    m2 = float(np.mean(d**2))
    return float(np.mean(d**4) / m2**2 - 3.0) if m2 > 0 else float("nan")


def progress_of(lengths: np.ndarray) -> np.ndarray:
    """Episode progress ``t / (T - 1)`` of every row of the concatenated episodes (0 for one-step ones)."""
    lengths = np.asarray(lengths, np.int64)
    step = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return step / np.maximum(np.repeat(lengths - 1, lengths), 1)


def progress_histogram(active: np.ndarray, progress: np.ndarray, bins: int = BINS) -> dict:
    edges = np.linspace(0.0, 1.0, bins + 1)
    return {
        "edges": edges.round(4).tolist(),
        "active": np.histogram(progress[active], edges)[0].tolist(),
        "all": np.histogram(progress, edges)[0].tolist(),
    }


def extreme_rows(c: np.ndarray, lengths: np.ndarray, count: int, top: bool) -> np.ndarray:
    """Rows of the ``count`` most extreme episode extremes (highest for ``top``, else lowest), most
    extreme first; one row per episode."""
    signed = np.asarray(c, np.float64) if top else -np.asarray(c, np.float64)
    episode = np.repeat(np.arange(len(lengths)), lengths)  # every episode has at least one step
    order = np.lexsort((np.arange(len(signed)), -signed, episode))  # per episode: most extreme, earliest
    best = order[np.searchsorted(episode[order], np.arange(len(lengths)))]
    rank = np.lexsort((best, -signed[best]))
    return best[rank][:count]


def describe(c: np.ndarray, lengths: np.ndarray, nonnegative: bool, moments: int) -> dict:
    """Activity, kurtosis, progress histogram and the rows of the top (and, unless ``nonnegative``:
    the bottom of a code is its inactive state, bottom) moments of one coordinate."""
    active, rule = active_mask(c, nonnegative)
    return {
        **rule,
        "mean": float(np.mean(c)),
        "std": float(np.std(c)),
        "kurtosis": excess_kurtosis(c),
        "progress": progress_histogram(active, progress_of(lengths)),
        "top_rows": extreme_rows(c, lengths, moments, top=True),
        "bottom_rows": np.zeros(0, np.int64) if nonnegative else extreme_rows(c, lengths, moments, top=False),
    }
