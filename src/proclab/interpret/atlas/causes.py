"""What a direction causes: its rows of the intervention sweep, with where each edit lands.

The sweep (:mod:`proclab.interpret.sweep.grid`) holds each direction's coordinate at each arm's value on
paired real levels and tests every change with a correction over the directions (one family per
arm and metric). A card lists, per arm: the held value and its percentile in the recorded
distribution, whether it leaves the data, and the changes in return, level completion, episode
length and the TV distance of the actions with their corrected intervals and adjusted p-values,
plus the single actions whose frequency changed significantly.

**Role.** An edit that leaves the recorded data (``off_data``) says what the agent does in a state
it never visits, so it is shown, marked, and never counted as the direction's role. A direction
*has a significant causal effect* when some on-data edit changed some of the four metrics
significantly after the sweep's correction (Holm or Benjamini-Hochberg over the swept directions,
one family per arm and metric: each family keeps its error rate at ``alpha``; across the
``arms x 4`` families a null direction can still be flagged in more than one, which the counts in
``atlas.json`` state beside the rule). A direction the sweep did not include, or a folder without a
sweep of this basis, says "sweep not run".
"""

from __future__ import annotations

import json
from pathlib import Path

from proclab.interpret.workspace.systems import file_digest

METRICS = ("level_complete", "return", "length", "tv_distance")
NAMES = {"level_complete": "completion", "return": "return", "length": "length", "tv_distance": "action TV"}


def load_sweep(folder: Path, basis_file: Path) -> tuple[dict | None, str]:
    """The sweep of ``folder`` (``sweep.json``) when it was run on the current ``basis_file``, else None
    and the reason."""
    path = Path(folder) / "sweep.json"
    if not path.is_file():
        return None, f"sweep not run (no {path.parent.name}/sweep.json)"
    summary = json.loads(path.read_text())
    digest = summary.get("basis_digest")
    if digest is not None and digest != file_digest(basis_file):
        return None, "sweep not run on this fit of the basis (it was refitted after the sweep)"
    return summary, sweep_note(summary)


def sweep_note(summary: dict) -> str:
    """What the cards say of the sweep their causes come from."""
    return f"sweep of {len(summary['levels'])} paired levels"


def _metric(m: dict) -> dict:
    head = {"change": m["value"]} if "value" in m else {"change": m["change"]}
    return {
        **head,
        "ci95": m["ci95"],
        "ci_corrected": m["ci_corrected"],
        "p_adjusted": m["p_adjusted"],
        "significant": m["significant"],
    }


def families(summary: dict) -> int:
    """(arm, metric) families the sweep tested among :data:`METRICS`."""
    return len(summary["arms"]) * len(METRICS)


def direction_causes(summary: dict | None, m: int, reason: str) -> dict:
    """Card section of direction ``m``: its arms, whether it has a significant on-data effect, and its
    largest on-data change per metric (the atlas' sort keys)."""
    if summary is None or m not in summary["directions"]:
        return {"swept": False, "note": reason if summary is None else "sweep not run on this direction"}
    arms, effect, significant = [], dict.fromkeys(METRICS, 0.0), False
    for r in summary["results"]:
        if r["direction"] != m:
            continue
        e = r["edit"]
        metrics = {k: _metric(r[k]) for k in METRICS}
        actions = {
            name: _metric(a)
            for name, a in r.get("actions", {}).items()
            if a["significant"] and not e["off_data"]
        }
        arms.append(
            {
                "arm": r["arm"],
                "held": e["value"],
                "percentile": e["percentile"],
                "off_data": e["off_data"],
                "data_range": e["data_range"],
                "metrics": metrics,
                "actions": actions,
            }
        )
        if not e["off_data"]:
            for k in METRICS:
                effect[k] = max(effect[k], abs(metrics[k]["change"]))
                significant = significant or metrics[k]["significant"]
    order = {a: i for i, a in enumerate(summary["arms"])}
    arms.sort(key=lambda a: order.get(a["arm"], len(order)))
    return {
        "swept": True,
        "note": reason,
        "arms": arms,
        "effect": effect,
        "significant": significant,
        "significant_off_data_only": not significant
        and any(a["off_data"] and any(v["significant"] for v in a["metrics"].values()) for a in arms),
        "rule": f"some on-data edit significant after the sweep's {summary['correction']['method']} "
        f"correction (alpha {summary['correction']['alpha']}, {families(summary)} families of arm x metric)",
    }


def strongest(causes: dict) -> tuple[dict, str, dict] | None:
    """The on-data (arm, metric) with the smallest adjusted p-value among the significant ones (ties: the
    metric first in :data:`METRICS`, then the largest change), for the card's summary line; None when
    there is none."""
    best = None
    for arm in causes.get("arms", []):
        if arm["off_data"]:
            continue
        for k in METRICS:
            v = arm["metrics"][k]
            if v["significant"]:
                key = (v["p_adjusted"], METRICS.index(k), -abs(v["change"]))
                if best is None or key < best[0]:
                    best = (key, arm, k, v)
    return None if best is None else best[1:]
