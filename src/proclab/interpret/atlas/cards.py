"""One card per direction, assembled from measurements, and its one-line summary.

The summary line is built from at most three measured numbers and claims nothing else:

1. what it causes: the on-data sweep edit with the smallest adjusted p-value among the significant
   ones (``mean-ablation: completion -0.31 [-0.40, -0.22]``, the interval corrected for the
   directions), or "no significant on-data effect", or "sweep not run";
2. what it tracks: the quantity with the largest ``|r|`` at lag 0 among those tracked after Holm's
   correction (``tracks value r = +0.62 [+0.58, +0.66]``);
3. a lead or lag, when one is established (:mod:`proclab.interpret.atlas.tracking`): ``leads action
   up-right by 3 steps (r = +0.41 [+0.35, +0.47])``.
"""

from __future__ import annotations

import numpy as np

from proclab.interpret.atlas.causes import NAMES, strongest
from proclab.interpret.atlas.tracking import ALPHA, MIN_EPISODES, NO_LAGS
from proclab.stats.corrections import holm

ARM_NAMES = {
    "collapse": "increment-collapse",
    "mean": "mean-ablation",
    "resample": "resample-ablation",
    "p05": "amplify low (p05)",
    "p95": "amplify high (p95)",
    "on": "held on",
}


def _r(r: float, ci) -> str:
    return f"r = {r:+.2f} [{ci[0]:+.2f}, {ci[1]:+.2f}]"


def tracked(names: list[str], track: dict, m: int) -> list[dict]:
    """Direction ``m``'s rows of :func:`~proclab.interpret.atlas.tracking.tracking`, one per quantity,
    strongest ``|r|`` at lag 0 first, with the tests of :mod:`~proclab.interpret.atlas.tracking`:
    ``tracked`` (Holm over the quantities) and the peak's ``claimed`` (Bonferroni over quantities x lags)."""
    lags = track["lags"].tolist()
    zero = lags.index(0)
    tracked_p = holm(track["p0"][m])
    candidates = len(names) * (len(lags) - 1)
    enough = track["episodes"] >= MIN_EPISODES
    rows = []
    for q, name in enumerate(names):
        r, ci = track["r"][m, q], track["ci"][m, q]
        peak = int(track["peak"][m, q])
        j = lags.index(peak)
        claimed = bool(
            enough
            and name not in NO_LAGS
            and np.isfinite(r[j])
            and (ci[j, 0] > 0 or ci[j, 1] < 0)
            and track["p_gain"][m, q] * candidates <= ALPHA
        )
        rows.append(
            {
                "quantity": name,
                "r0": _num(r[zero]),
                "ci0": [_num(ci[zero, 0]), _num(ci[zero, 1])],
                "p0_holm": float(tracked_p[q]),
                "tracked": bool(enough and tracked_p[q] <= ALPHA and np.isfinite(r[zero])),
                "r": [_num(v) for v in r],
                "ci": [[_num(a), _num(b)] for a, b in ci],
                "peak": {
                    "lag": peak,
                    "r": _num(r[j]),
                    "ci": [_num(ci[j, 0]), _num(ci[j, 1])],
                    "claimed": claimed,
                },
                "peak_gain_ci": [_num(v) for v in track["gain"][m, q]],
                "peak_gain_p": float(track["p_gain"][m, q]),
            }
        )
    rows.sort(key=lambda row: -abs(row["r0"]) if row["r0"] is not None else 0.0)
    return rows


def _num(v) -> float | None:
    """A float for JSON, None for NaN."""
    v = float(v)
    return v if np.isfinite(v) else None


def summary_line(causes: dict, tracks: list[dict], episodes: int) -> str:
    """The card's one line (see the module docstring)."""
    parts = []
    if not causes["swept"]:
        parts.append(causes["note"])
    else:
        best = strongest(causes)
        if best is not None:
            arm, metric, v = best
            lo, hi = v["ci_corrected"]
            parts.append(
                f"{ARM_NAMES.get(arm['arm'], arm['arm'])}: {NAMES[metric]} {v['change']:+.3g} [{lo:+.3g}, {hi:+.3g}]"
            )
        elif causes["significant_off_data_only"]:
            parts.append("no significant on-data effect (only off-data edits changed it)")
        else:
            parts.append("no significant on-data effect")
    held = [t for t in tracks if t["tracked"]]
    if episodes < MIN_EPISODES:
        parts.append(f"too few episodes ({episodes}) to test what it tracks")
    elif held:
        parts.append(f"tracks {held[0]['quantity']} {_r(held[0]['r0'], held[0]['ci0'])}")
    else:
        parts.append("tracks none of the measured quantities")
    leads = [t for t in tracks if t["peak"]["claimed"]]
    if leads:
        t = max(leads, key=lambda t: abs(t["peak"]["r"]))
        lag = t["peak"]["lag"]
        verb = "leads" if lag > 0 else "follows"
        parts.append(
            f"{verb} {t['quantity']} by {abs(lag)} step{'s' if abs(lag) > 1 else ''} ({_r(t['peak']['r'], t['peak']['ci'])})"
        )
    return "; ".join(parts)


def sort_keys(card: dict, names: list[str]) -> dict[str, float | None]:
    """What the panel sorts cards by: causal effect per metric, activity, kurtosis, and |r| at lag 0 with
    each tracked quantity (None: not measured)."""
    causes, act = card["causes"], card["activation"]
    keys: dict[str, float | None] = {
        f"effect:{k}": (causes["effect"][k] if causes["swept"] else None) for k in NAMES
    }
    keys["activity"] = act["active"]
    keys["kurtosis"] = _num(act["kurtosis"])
    by_name = {t["quantity"]: t for t in card["tracks"]}
    for name in names:
        r0 = by_name[name]["r0"] if name in by_name else None
        keys[f"track:{name}"] = None if r0 is None else abs(r0)
    return keys
