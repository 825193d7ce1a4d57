"""A level's parsed state as tables (or JSON), and as a PNG with every entity labelled (``proclab level show``).

The level is generated (``--game --mode --level-seed``) or read from a level-state file
(``--levels FILE --index I``). Positions are world units as procgen stores them: x to the right,
y up, one unit per grid cell, an entity's ``(x, y)`` its centre and ``(rx, ry)`` its half-size;
these are the coordinates ``proclab level edit`` takes.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from rich.table import Table

from proclab.envs.state import GameState, glossary, parse_state
from proclab.levels.level import Level, play_frames
from proclab.levels.picture import save_level_picture


def describe(state: GameState, mode: str) -> dict:
    """The parts of a state a reader looks at, as plain JSON-able data."""
    names = glossary(state.game)
    values, counts = np.unique(state.grid, return_counts=True)
    agent = state.agent
    return {
        "game": state.game,
        "mode": mode,
        "level_seed": state.header.current_level_seed,
        "step": state.header.cur_time,
        "grid": {"width": int(state.grid.shape[1]), "height": int(state.grid.shape[0])},
        "cells": {names.cells.get(int(v), f"cell{v}"): int(n) for v, n in zip(values, counts, strict=True)},
        "goal": names.goal,
        "agent": {"x": agent.x, "y": agent.y, "vx": agent.vx, "vy": agent.vy},
        "entities": [
            {
                "kind": e.kind,
                "type": e.type,
                "x": e.x,
                "y": e.y,
                "vx": e.vx,
                "vy": e.vy,
                "rx": e.rx,
                "ry": e.ry,
            }
            for e in state.entities
        ],
        "game_fields": {f.name: getattr(state.extra, f.name) for f in dataclasses.fields(state.extra)},
    }


def _short(value) -> str:
    text = str(value if not isinstance(value, list | tuple) or len(value) <= 8 else f"[{len(value)} values]")
    return text if len(text) <= 60 else text[:57] + "..."


def print_tables(info: dict, console) -> None:
    head = Table(title=f"{info['game']} ({info['mode']}) level {info['level_seed']}, step {info['step']}")
    head.add_column("field")
    head.add_column("value")
    head.add_row("grid", f"{info['grid']['width']} x {info['grid']['height']} cells")
    head.add_row("goal kind", str(info["goal"]))
    a = info["agent"]
    head.add_row("agent", f"x={a['x']:.2f} y={a['y']:.2f} vx={a['vx']:.2f} vy={a['vy']:.2f}")
    for name, value in info["game_fields"].items():
        head.add_row(name, _short(value))
    console.print(head)
    ents = Table(title=f"{len(info['entities'])} entities (world units; x right, y up)")
    for col in ("#", "kind", "type", "x", "y", "vx", "vy", "rx", "ry"):
        ents.add_column(col, justify="left" if col == "kind" else "right")
    for i, e in enumerate(info["entities"]):
        ents.add_row(
            str(i), e["kind"], str(e["type"]), *(f"{e[k]:.2f}" for k in ("x", "y", "vx", "vy", "rx", "ry"))
        )
    console.print(ents)
    cells = Table(title="grid cells")
    cells.add_column("kind")
    cells.add_column("cells", justify="right")
    for kind, n in sorted(info["cells"].items(), key=lambda kv: -kv[1]):
        cells.add_row(kind, str(n))
    console.print(cells)


def show(level: Level, png: Path | None) -> dict:
    """Print ``level`` and (with ``png``) render it there; returns its description."""
    state = parse_state(level.state.data)
    info = describe(state, level.mode)
    if png is not None:
        _, human = play_frames(level.state.data, level.game, level.mode)
        save_level_picture(png, state, human, level.state.note or level.source)
    return info
