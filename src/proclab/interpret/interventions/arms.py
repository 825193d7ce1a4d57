"""The sweep's arms: where each one holds a direction's coordinate, and where that lies in the data.

Every arm holds coordinate ``m`` of the edited state at one value for a whole episode
(:class:`~proclab.interpret.interventions.direction_edits.Hold`, a ``set`` of one coordinate); they differ in the value:

* ``collapse``: the coordinate of the state an episode starts from (all zeros). Holding it there
  is exactly the increment-collapse of ``--collapse m`` (the coordinate of every increment is
  zero, so the coordinate never leaves its starting value), named as the seed's experiments
  named it. That value can lie far outside the recorded states (a basis z-scores units that
  barely move), so what collapse measures is often where the zero state lies, not what the
  direction does: the reason for the on-data arms below.
* ``mean``: the coordinate's mean over the recorded states (mean-ablation).
* ``resample``: the coordinate of a recorded state drawn at random, a new draw per episode
  (resample-ablation: the edit keeps the coordinate's own distribution across episodes and only
  cuts its link to what the agent sees).
* ``p05``, ``p95``: its 5th or 95th percentile over the recorded states (amplify low, high).
* ``on`` (not swept by default): the median of the recorded values above their median, the value a
  coordinate typically has when it is up. For a sparse code that is zero on most states (an atom
  active on 3 % of them has ``p05 = p95 = 0``), it is the atom's typical active value: the only
  on-data arm that turns a rarely active atom on.

Two more kinds of edit (sweep only, :mod:`proclab.interpret.sweep.plan`):

* ``resample-step``: the coordinate of a recorded state drawn at random at *every step* (its
  distribution kept at every step, its link to what the agent sees and did cut at every step);
* ``ARM@K`` (``p95@10``, ``mean@1``, ...) for a fixed-value arm: *brief*, held at that arm's value
  for the first ``K`` steps of the episode, then released (the agent's own dynamics take over).

The recorded distribution is the coordinate over every state ``analyze hidden`` analysed; a
value's percentile is the share of recorded values below it (ties counted half), and an edit
whose values lie mostly outside the central 99 % (percentiles 0.5 to 99.5) is *off the data*.
"""

from __future__ import annotations

import numpy as np

from proclab.errors import ProclabError, unknown_choice

ARMS: dict[str, str] = {
    "collapse": "held at the coordinate of the all-zero start state (increment-collapse)",
    "mean": "held at its mean over the recorded states (mean-ablation)",
    "resample": "held at its value in a random recorded state, drawn anew per episode (resample-ablation)",
    "p05": "held at its 5th percentile over the recorded states (amplify low)",
    "p95": "held at its 95th percentile over the recorded states (amplify high)",
    "on": "held at the median of its recorded values above their median (its typical value when up)",
    "resample-step": "held at a recorded value drawn anew at every step",
}
BRIEF = ("collapse", "mean", "p05", "p95", "on")
"""Arms that can be held briefly, ``ARM@K``: the first K steps of an episode, then released."""
DEFAULT_ARMS = ("collapse", "mean", "resample", "p05", "p95")
"""The arms a sweep plays unless ``--arms`` names others."""
ON_DATA_RANGE = (0.5, 99.5)
"""Percentiles of the recorded distribution between which an edit counts as on the data."""


def split_arm(arm: str) -> tuple[str, int]:
    """``"p95@10"`` -> ``("p95", 10)``; an arm held for whole episodes -> ``(arm, -1)``."""
    name, at, steps = arm.partition("@")
    if not at:
        return arm, -1
    if name not in BRIEF or not steps.isdigit() or int(steps) < 1:
        raise ProclabError(
            f"arm {arm!r}: a brief arm is ARM@K with ARM one of {', '.join(BRIEF)} and K >= 1 steps (e.g. p95@10)"
        )
    return name, int(steps)


def describe(arm: str) -> str:
    """What arm ``arm`` does, in words."""
    name, steps = split_arm(arm)
    return ARMS[name] if steps < 0 else f"{ARMS[name]}, for the first {steps} steps only, then released"


def parse_arms(text: str) -> tuple[str, ...]:
    """``"mean,p95,p95@10"`` -> ``("mean", "p95", "p95@10")``, each a known arm, none twice."""
    arms = tuple(dict.fromkeys(a.strip() for a in text.split(",") if a.strip()))
    if not arms:
        raise ProclabError(f"--arms {text!r} names no arm; choose from {', '.join(ARMS)}")
    for arm in arms:
        if split_arm(arm)[0] not in ARMS:
            raise unknown_choice("arm", arm, ARMS)
    return arms


class Recorded:
    """The recorded coordinates (``(N, k)``), sorted per coordinate, and ``start``: the coordinates
    of the state an episode starts from."""

    def __init__(self, coords: np.ndarray, start: np.ndarray):
        coords = np.asarray(coords, np.float64)
        if coords.ndim != 2 or len(coords) == 0:
            raise ProclabError(
                f"the recorded coordinates must be a non-empty (N, k) array, got {coords.shape}"
            )
        self.values = coords
        self.sorted = np.sort(coords, axis=0)
        self.start = np.asarray(start, np.float64)
        self.k = coords.shape[1]

    def percentile(self, m: int, values) -> np.ndarray:
        """Percent of recorded values of coordinate ``m`` below each value (ties count half)."""
        col = self.sorted[:, m]
        v = np.asarray(values, np.float64)
        below = np.searchsorted(col, v, "left") + np.searchsorted(col, v, "right")
        return 50.0 * below / len(col)

    def quantile(self, m: int, q: float) -> float:
        return float(np.percentile(self.sorted[:, m], q))

    def held(self, arm: str, m: int, episodes: int, rng: np.random.Generator) -> np.ndarray:
        """The value arm ``arm`` holds coordinate ``m`` at, for each of ``episodes`` episodes (NaN for
        ``resample-step``: drawn at every step by the player)."""
        arm = split_arm(arm)[0]
        if arm == "resample-step":
            return np.full(episodes, np.nan)
        if arm == "resample":
            return self.values[rng.integers(0, len(self.values), episodes), m]
        if arm == "collapse":
            value = self.start[m]
        elif arm == "mean":
            value = self.values[:, m].mean()
        elif arm in ("p05", "p95"):
            value = self.quantile(m, float(arm[1:]))
        elif arm == "on":
            col = self.sorted[:, m]
            up = col[col > np.median(col)]
            value = np.median(up) if len(up) else np.median(col)
        else:
            raise unknown_choice("arm", arm, ARMS)
        return np.full(episodes, float(value))

    def placement(self, m: int, values) -> dict:
        """Where ``values`` (an edit's values of coordinate ``m``; NaN: drawn from the recorded values at
        every step, so placed as they are) lie in the recorded distribution."""
        v = np.asarray(values, np.float64).ravel()
        if np.isnan(v).all():
            v = self.values[:, m]
        pct = self.percentile(m, v)
        lo, hi = ON_DATA_RANGE
        outside = float(np.mean((pct < lo) | (pct > hi)))
        return {
            "value": float(np.median(v)),
            "value_range": [float(v.min()), float(v.max())],
            "percentile": float(np.median(pct)),
            "percentile_range": [float(pct.min()), float(pct.max())],
            "data_range": [self.quantile(m, lo), self.quantile(m, hi)],
            "off_data_share": outside,
            "off_data": outside > 0.5,
        }


def off_data_warning(placements: dict[str, dict], limit: int = 4) -> str | None:
    """One line naming the edits (``label -> placement``) whose values leave the data, or None."""
    off = [(label, p) for label, p in placements.items() if p["off_data"]]
    if not off:
        return None
    shown = "; ".join(
        f"{label} at {p['value']:.3g} (percentile {p['percentile']:.1f})" for label, p in off[:limit]
    )
    more = f"; and {len(off) - limit} more" if len(off) > limit else ""
    lo, hi = ON_DATA_RANGE
    return (
        f"warning: {len(off)} of {len(placements)} edits leave the recorded {lo}-{hi} % range, so their effects "
        f"describe states the agent never visits: {shown}{more}"
    )
