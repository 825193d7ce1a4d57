"""The sweep's swaps (``--swaps``): which pairs of coordinates to exchange, named by id or found by measurement.

``--swaps 3:7,3:9`` swaps coordinate 3 with 7, and 3 with 9, each as one more variant of the sweep on the
same paired levels (:func:`~proclab.interpret.bases.coordinates.swap` says what is exchanged and why).

**By measurement.** A side named by a kind of the game (``--swaps saw:crate``) is the direction whose
coordinate tracks proximity to that kind most strongly in the atlas of the same basis
(``ANALYSIS/atlas[-<basis>]/atlas.json``, :mod:`proclab.interpret.atlas.tracking`): among the directions
whose correlation with ``gt <kind> proximity`` at lag 0 survives the atlas's Holm correction, the one with
the largest ``|r|``, and for the second side of a pair the best other than the first. No hand-chosen id
enters; the pick, its ``r`` and interval are written into ``sweep.json``. An atlas of an earlier fit of
the basis, or a kind no direction tracks, is refused with one line (name the ids instead). The sign of
``r`` is reported, not used: a direction that falls as a saw comes near tracks it as much as one that
rises, and a swap of two directions of opposite signs exchanges their values as they are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from proclab.errors import ProclabError

_SIDE = r"(\d+|[a-z][a-z0-9_]*)"


def parse_swaps(text: str) -> list[tuple[int | str, int | str]]:
    """``"3:7,saw:crate"`` -> ``[(3, 7), ("saw", "crate")]``; a side is a direction id or a kind's name."""
    pairs = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        m = re.fullmatch(_SIDE + ":" + _SIDE, item)
        if m is None:
            raise ProclabError(
                f"--swaps {item!r}: expected I:J, each a direction id or a kind of the game (e.g. 3:7 or saw:crate)"
            )
        pairs.append(tuple(int(s) if s.isdigit() else s for s in m.groups()))
    return pairs


def proximity(kind: str) -> str:
    """The atlas's quantity for how near the nearest ``kind`` is (:mod:`proclab.interpret.atlas.tracking`)."""
    return f"gt {kind} proximity"


def pick_direction(atlas: dict, kind: str, exclude: set[int]) -> dict:
    """The direction of ``atlas`` (an ``atlas.json``) that tracks proximity to ``kind`` most strongly,
    among the tracked ones not in ``exclude``: ``{kind, quantity, direction, r0, ci0}``."""
    quantity = proximity(kind)
    if quantity not in atlas.get("quantities", []):
        raise ProclabError(
            f"--swaps {kind}: the atlas of {atlas['basis']} has no quantity {quantity!r} (its store records no "
            f"{kind} in any described episode, or no ground truth); name the direction by id"
        )
    best = None
    for card in atlas["cards"]:
        m = card["direction"]
        row = next(t for t in card["tracks"] if t["quantity"] == quantity)
        if m in exclude or not row["tracked"] or row["r0"] is None:
            continue
        if best is None or abs(row["r0"]) > abs(best["r0"]):
            best = {"kind": kind, "quantity": quantity, "direction": m, "r0": row["r0"], "ci0": row["ci0"]}
    if best is None:
        raise ProclabError(
            f"--swaps {kind}: no direction of the {atlas['basis']} atlas tracks {quantity!r} after its "
            "correction; name the direction by id"
        )
    return best


def read_atlas(folder: Path, digest: str) -> dict:
    """``folder/atlas.json`` when it describes the fit whose file has SHA-256 ``digest``; one line otherwise."""
    path = Path(folder) / "atlas.json"
    if not path.is_file():
        raise ProclabError(
            f"--swaps by kind reads the atlas of the swept basis, and {str(path)!r} does not exist; run "
            f"`proclab analyze atlas` with that --basis first"
        )
    atlas = json.loads(path.read_text())
    if atlas.get("basis_digest") != digest:
        raise ProclabError(
            f"--swaps by kind: {str(path)!r} was built on another fit of the basis (or before atlases recorded "
            "which); run `proclab analyze atlas` again"
        )
    return atlas


def resolve(
    pairs: list[tuple[int | str, int | str]], k: int, atlas: Callable[[], dict] | None
) -> tuple[list[tuple[int, int]], list[dict]]:
    """The pairs as coordinate ids of a basis of ``k`` directions, and the picks made by measurement;
    ``atlas()`` gives the atlas that kinds are looked up in (None: kinds are refused)."""
    ids, picks = [], []
    for pair in pairs:
        sides: list[int] = []
        for side in pair:
            if isinstance(side, int):
                if not 0 <= side < k:
                    raise ProclabError(
                        f"--swaps: direction {side} is outside the basis' directions 0-{k - 1}"
                    )
                sides.append(side)
                continue
            if atlas is None:
                raise ProclabError(
                    f"--swaps {side}: a kind is looked up in the folder's atlas; name ids here"
                )
            pick = pick_direction(atlas(), side, set(sides))
            picks.append(pick)
            sides.append(pick["direction"])
        if sides[0] == sides[1]:
            raise ProclabError(f"--swaps {pair[0]}:{pair[1]} swaps direction {sides[0]} with itself")
        ids.append((sides[0], sides[1]))
    return ids, picks
