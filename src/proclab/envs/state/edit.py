"""Level edits on a :class:`GameState`: pure functions that return a new state.

A *kind* is a glossary name; for cell kinds (maze's cheese, coinrun's coin, miner's diamonds)
the same functions edit grid cells: a removed cell becomes empty space, a moved one leaves space
behind, an added one fills the cell under the given point. Positions are world units (x right,
y up; cell ``(c, r)`` spans ``[c, c+1) x [r, r+1)``). Where a game counts its objects to decide
that a level is complete (chaser's orbs, climber's coins), the count follows the edit so the
edited level stays winnable. The result serializes to bytes procgen's ``set_state`` accepts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from proclab.envs.state.glossary import SPACE, glossary
from proclab.envs.state.model import Entity, GameState, agent_index
from proclab.errors import ProclabError

# (game, kind) -> the game's field counting that kind towards level completion.
_COUNTERS = {("chaser", "orb"): "total_orbs", ("climber", "coin"): "coin_quota"}


def _recount(state: GameState, kind: str, delta: int) -> GameState:
    name = _COUNTERS.get((state.game, kind))
    if name is None or delta == 0:
        return state
    extra = dataclasses.replace(state.extra, **{name: getattr(state.extra, name) + delta})
    return dataclasses.replace(state, extra=extra)


def _cell(state: GameState, xy) -> tuple[int, int]:
    """The (row, col) of the cell under world point ``xy``; a one-line error outside the level."""
    x, y = float(xy[0]), float(xy[1])
    height, width = state.grid.shape
    if not (0 <= x < width and 0 <= y < height):
        raise ProclabError(
            f"position ({x:g}, {y:g}) is outside the {state.game} level (0..{width} x 0..{height})."
        )
    return int(y), int(x)


def _check_inside(state: GameState, xy) -> tuple[float, float]:
    _cell(state, xy)
    return float(xy[0]), float(xy[1])


def check_open(state: GameState, xy, kind: str) -> None:
    """Refuse, in one line, to put ``kind`` (not itself a wall) on a wall cell (any of the game's ``*wall*``
    cells): procgen accepts such a state, but the goal or agent sits where nothing can reach it, and an
    experiment on it measures the edit's impossibility, not the agent. The edit functions themselves allow
    it (tests place things anywhere); :class:`proclab.Level`'s edits, a researcher's, check."""
    row, col = _cell(state, xy)
    there = glossary(state.game).cells.get(int(state.grid[row, col]), "")
    if "wall" in there and "wall" not in kind:
        raise ProclabError(
            f"cannot put {kind!r} at ({float(xy[0]):g}, {float(xy[1]):g}): that cell is a {there} in this "
            f"{state.game} level; choose an open cell (Level.positions('space'))."
        )


def _indices(state: GameState, kind: str) -> list[int]:
    value = glossary(state.game).type_of(kind)
    return [i for i, e in enumerate(state.entities) if e.type == value]


def _cells(state: GameState, kind: str) -> np.ndarray:
    rows, cols = np.nonzero(state.grid == glossary(state.game).type_of(kind))
    return np.stack([rows, cols], axis=1)


def _nth(found, kind: str, index: int, game: str):
    if not -len(found) <= index < len(found):
        raise ProclabError(f"{game} state has {len(found)} {kind!r}; index {index} does not exist.")
    return found[index]


def remove_entities(
    state: GameState, kind: str, where: Callable[[float, float], bool] | None = None
) -> GameState:
    """Remove every ``kind`` (entities or cells) whose centre ``(x, y)`` satisfies ``where`` (all if None)."""
    keep = where or (lambda x, y: True)
    if glossary(state.game).is_cell(kind):
        grid = state.grid.copy()
        removed = 0
        for row, col in _cells(state, kind):
            if keep(col + 0.5, row + 0.5):
                grid[row, col] = SPACE
                removed += 1
        return _recount(dataclasses.replace(state, grid=grid), kind, -removed)
    if kind == "agent":
        raise ProclabError("the agent cannot be removed; procgen needs it (move it instead).")
    doomed = {i for i in _indices(state, kind) if keep(state.entities[i].x, state.entities[i].y)}
    entities = [e for i, e in enumerate(state.entities) if i not in doomed]
    return _recount(dataclasses.replace(state, entities=entities), kind, -len(doomed))


def move_entity(state: GameState, kind: str, to_xy, index: int = 0) -> GameState:
    """Move the ``index``-th ``kind`` (entity list order; cells bottom row first) so its centre is ``to_xy``."""
    if glossary(state.game).is_cell(kind):
        row, col = _nth(_cells(state, kind), kind, index, state.game)
        to_row, to_col = _cell(state, to_xy)
        grid = state.grid.copy()
        grid[row, col] = SPACE
        grid[to_row, to_col] = state.grid[row, col]  # whatever was there is replaced
        return dataclasses.replace(state, grid=grid)
    i = _nth(_indices(state, kind), kind, index, state.game)
    x, y = _check_inside(state, to_xy)
    entities = list(state.entities)
    entities[i] = dataclasses.replace(entities[i], x=x, y=y)
    return dataclasses.replace(state, entities=entities)


def move_agent(state: GameState, xy) -> GameState:
    """Put the agent's centre at ``xy`` (its velocity is kept)."""
    return move_entity(state, "agent", xy, index=0)


def _new_entity(state: GameState, kind: str, x: float, y: float) -> Entity:
    """A copy of an existing ``kind`` (same size, look, speed) if there is one, else procgen's defaults."""
    existing = _indices(state, kind)
    if existing:
        return dataclasses.replace(state.entities[existing[0]], x=x, y=y)
    value = glossary(state.game).type_of(kind)
    # The defaults of procgen's Entity(x, y, vx, vy, r, type) constructor (src/entity.cpp), half a cell wide.
    return Entity(
        x=x, y=y, vx=0.0, vy=0.0, rx=0.5, ry=0.5, type=value, image_type=value, image_theme=0, render_z=0,
        will_erase=False, collides_with_entities=False, collision_margin=0.0, rotation=0.0, vrot=0.0,
        is_reflected=False, fire_time=-1, spawn_time=-1, life_time=0, expire_time=-1, use_abs_coords=False,
        friction=1.0, smart_step=False, avoids_collisions=False, auto_erase=True, alpha=1.0, health=1.0,
        theta=-100.0, grow_rate=1.0, alpha_decay=1.0, climber_spawn_x=0.0, kind=kind,
    )  # fmt: skip


def add_entity(state: GameState, kind: str, xy) -> GameState:
    """Add one ``kind`` centred at ``xy`` (for a cell kind: fill the cell under ``xy``)."""
    if glossary(state.game).is_cell(kind):
        row, col = _cell(state, xy)
        grid = state.grid.copy()
        grid[row, col] = glossary(state.game).type_of(kind)
        added = int(state.grid[row, col] != grid[row, col])
        return _recount(dataclasses.replace(state, grid=grid), kind, added)
    if kind == "agent":
        raise ProclabError("a game has exactly one agent; move it instead of adding one.")
    x, y = _check_inside(state, xy)
    entities = [*state.entities, _new_entity(state, kind, x, y)]
    agent_index(entities)
    return _recount(dataclasses.replace(state, entities=entities), kind, 1)
