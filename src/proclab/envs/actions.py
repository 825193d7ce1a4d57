"""The 15 Procgen actions: one table, used for overlays, analyses and scripted agents.

Procgen maps every game onto the same 15 button combinations (index = action id). Games ignore
buttons they do not use; for most games actions 9-14 (the D/A/W/S/Q/E keys) are no-ops.
"""

from __future__ import annotations

from typing import NamedTuple


class Action(NamedTuple):
    index: int
    keys: tuple[str, ...]
    name: str
    dx: int  # arrow direction for overlays: +1 right
    dy: int  # +1 up


ACTIONS: tuple[Action, ...] = (
    Action(0, ("LEFT", "DOWN"), "down-left", -1, -1),
    Action(1, ("LEFT",), "left", -1, 0),
    Action(2, ("LEFT", "UP"), "up-left", -1, 1),
    Action(3, ("DOWN",), "down", 0, -1),
    Action(4, (), "no-op", 0, 0),
    Action(5, ("UP",), "up", 0, 1),
    Action(6, ("RIGHT", "DOWN"), "down-right", 1, -1),
    Action(7, ("RIGHT",), "right", 1, 0),
    Action(8, ("RIGHT", "UP"), "up-right", 1, 1),
    Action(9, ("D",), "D", 0, 0),
    Action(10, ("A",), "A", 0, 0),
    Action(11, ("W",), "W", 0, 0),
    Action(12, ("S",), "S", 0, 0),
    Action(13, ("Q",), "Q", 0, 0),
    Action(14, ("E",), "E", 0, 0),
)

NUM_ACTIONS = len(ACTIONS)
NOOP = 4
ACTION_NAMES: tuple[str, ...] = tuple(a.name for a in ACTIONS)
