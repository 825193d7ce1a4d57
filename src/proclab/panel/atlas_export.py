"""The atlases of an analysis folder (``ANALYSIS/atlas*/atlas.json``) as the panel's front page.

Each atlas becomes one entry of ``panel.json``'s ``atlases``: its cards, slimmed to what the gallery
shows (summary, sort keys, search text, activity, the strongest tracked quantities, the sweep's arms,
the moments with their strips and a link into the episode viewer, the saliency image), the sort keys
the gallery offers, and the rows of the sweep the cards link to. Images are copied under
``data/atlas/<basis>/``. A moment links into the episode viewer through a real window the exporter
adds around it (:func:`proclab.panel.export._add_moments`); one that no window can hold (an episode
shorter than the panel's window) has no link.
"""

from __future__ import annotations

import json
from pathlib import Path

from proclab.panel.bundle import rounded

METRICS = ("level_complete", "return", "length", "tv_distance")
SORTS = (
    ("effect:level_complete", "causal effect: completion"),
    ("effect:return", "causal effect: return"),
    ("effect:length", "causal effect: length"),
    ("effect:tv_distance", "causal effect: action TV"),
    ("activity", "activity"),
    ("kurtosis", "kurtosis"),
)
TRACKS_SHOWN = 5


def find_atlases(ws) -> list[dict]:
    """Every atlas of the folder (``atlas`` first, then ``atlas-<basis>`` by name), read."""
    paths = sorted(ws.path.glob("atlas*/atlas.json"), key=lambda p: (p.parent.name != "atlas", p.parent.name))
    return [json.loads(p.read_text()) | {"folder": p.parent} for p in paths]


def linked_moments(atlas: dict, per_card: int) -> list[tuple[int, int, str]]:
    """The (episode, step, what) of the first ``per_card`` top and bottom moments of every card."""
    out = []
    for card in atlas["cards"]:
        act = card["activation"]
        for i in range(per_card):
            for side in ("top", "bottom"):
                if i < len(act[side]):
                    m = act[side][i]
                    out.append((m["episode"], m["step"], f"{card['label']} {side} moment {i + 1}"))
    return out


def _metric(m: dict) -> list:
    """``[estimate, corrected lo, corrected hi, significant]``."""
    lo, hi = m["ci_corrected"]
    return [*rounded([m["change"], lo, hi], 4), bool(m["significant"])]


def _card(card: dict, prefix: str, basis: str, links: dict) -> dict:
    act, causes = card["activation"], card["causes"]
    moments = []
    for side in ("top", "bottom"):
        for m in act[side]:
            link = links.get((m["episode"], m["step"]))
            moments.append(
                {
                    "side": side,
                    "episode": m["episode"],
                    "step": m["step"],
                    "value": round(m["value"], 4),
                    "strip": f"{prefix}/{m['strip']}",
                    "sample": None if link is None else link[0],
                    "sample_step": None if link is None else link[1],
                }
            )
    arms = [
        {
            "arm": a["arm"],
            "held": round(a["held"], 4),
            "percentile": round(a["percentile"], 2),
            "off_data": a["off_data"],
            "metrics": {k: _metric(a["metrics"][k]) for k in METRICS},
            "row": f"sweep-{basis}-{card['direction']}-{a['arm']}",
        }
        for a in causes.get("arms", [])
    ]
    tracks = [t for t in card["tracks"] if t["r0"] is not None][:TRACKS_SHOWN]
    tracks += [t for t in card["tracks"] if t["peak"]["claimed"] and t not in tracks]
    return {
        "direction": card["direction"],
        "label": card["label"],
        "summary": card["summary"],
        "text": " | ".join(
            [card["label"], card["summary"], *(t["quantity"] for t in card["tracks"] if t["tracked"])]
        ).lower(),
        "keys": card["keys"],
        "activity": {
            "active": act["active"],
            "rule": act["rule"],
            "kurtosis": act["kurtosis"],
            "progress": act["progress"],
        },
        "tracks": [
            {k: t[k] for k in ("quantity", "r0", "ci0", "tracked", "peak")}
            | {"r": [None if v is None else round(v, 3) for v in t["r"]]}
            for t in tracks
        ],
        "causes": {
            "swept": causes["swept"],
            "note": causes["note"],
            "significant": causes.get("significant", False),
            "significant_off_data_only": causes.get("significant_off_data_only", False),
            "arms": arms,
        },
        "moments": moments,
        "saliency": None if card["saliency"] is None else f"{prefix}/{card['saliency']['image']}",
    }


def _sweep_rows(folder: Path, atlas: dict) -> list[dict]:
    if atlas.get("sweep") is None:
        return []
    summary = json.loads((folder.parent / atlas["sweep"]["folder"] / "sweep.json").read_text())
    return [
        {
            "id": f"sweep-{atlas['basis']}-{r['direction']}-{r['arm']}",
            "label": f"{atlas['label']} {r['direction']}",
            "direction": r["direction"],
            "arm": r["arm"],
            "held": round(r["edit"]["value"], 4),
            "percentile": round(r["edit"]["percentile"], 2),
            "off_data": r["edit"]["off_data"],
            "metrics": {
                k: _metric(r[k] | ({"change": r[k]["value"]} if "value" in r[k] else {})) for k in METRICS
            },
        }
        for r in summary["results"]
    ]


def atlas_section(atlas: dict, links: dict) -> tuple[dict, dict[str, Path]]:
    """One atlas as ``panel.json`` shows it, and the image files to copy (name under ``data/`` -> source)."""
    folder, basis = Path(atlas["folder"]), atlas["basis"]
    prefix = f"atlas/{basis}"
    files = {
        f"{prefix}/{p.relative_to(folder).as_posix()}": p
        for sub in ("strips", "saliency")
        for p in sorted((folder / sub).glob("*.png"))
    }
    prediction = atlas["prediction"]
    doc = {
        "basis": basis,
        "label": atlas["label"],
        "k": atlas["k"],
        "episodes": atlas["episodes"],
        "steps": atlas["steps"],
        "variance_explained": atlas["variance_explained"],
        "basis_fit": atlas["basis_fit"],
        "counts": atlas["counts"],
        "sweep_note": atlas["sweep_note"],
        "prediction": [p["verdict"] for p in prediction["pairings"].values()]
        if "pairings" in prediction
        else [prediction["note"]],
        "lags": atlas["lags"],
        "sorts": [list(s) for s in SORTS]
        + [[f"track:{q}", f"tracks {q} (|r| at lag 0)"] for q in atlas["quantities"]],
        "cards": [_card(c, prefix, basis, links) for c in atlas["cards"]],
        "sweep_rows": _sweep_rows(folder, atlas),
    }
    return doc, files
