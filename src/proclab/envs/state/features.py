"""Per-step ground truth as numbers: :func:`features` of one state, :func:`events` between two.

Feature names (stable; ``kind`` runs over :meth:`Glossary.feature_kinds`, in that order):

* ``agent_x, agent_y, agent_vx, agent_vy``: the agent's centre and velocity (world units, per step);
* ``goal_x, goal_y, goal_distance``: the nearest instance of the game's goal kind and its
  Euclidean distance from the agent; NaN where the game has no goal or none is present;
* ``<kind>_dx, <kind>_dy``: offset from the agent to the nearest ``kind`` (entity centre, or
  cell centre ``(col + .5, row + .5)``); NaN when there is none.

Entities drawn in screen coordinates (``use_abs_coords``: heist's key ring, plunder's legend)
are not in the world, so they are left out of features and events.

Event names: ``reward`` (the step paid a non-zero reward), ``level_complete``, ``died`` (the episode
ended otherwise, before the time limit), ``timeout``, then per kind ``<kind>_removed`` and
``<kind>_added`` (fewer / more of that kind than before). After an episode end the second state
is already the next level's, so the per-kind events are all false on that step.
"""

from __future__ import annotations

import numpy as np

from proclab.envs.state.glossary import SPACE, glossary
from proclab.envs.state.model import GameState

_AGENT = ("agent_x", "agent_y", "agent_vx", "agent_vy")
_GOAL = ("goal_x", "goal_y", "goal_distance")
_OUTCOMES = ("reward", "level_complete", "died", "timeout")


def feature_names(game: str) -> list[str]:
    kinds = glossary(game).feature_kinds()
    return [*_AGENT, *_GOAL, *(f"{kind}_{axis}" for kind in kinds for axis in ("dx", "dy"))]


def event_names(game: str) -> list[str]:
    kinds = glossary(game).feature_kinds()
    return [*_OUTCOMES, *(f"{kind}_{change}" for kind in kinds for change in ("removed", "added"))]


def positions(state: GameState, kind: str) -> np.ndarray:
    """World centres ``(n, 2)`` of every ``kind`` in ``state`` (entities, or cells of a cell kind)."""
    points = _Points(state)
    return points.xy[points.codes == points.code(kind)]


class _Points:
    """Every entity and non-empty cell of a state as one table of codes and centres, so that the
    nearest of every kind, and every kind's count, come from a few whole-array operations.

    An entity's code is its type, a cell's is its value plus ``_CELL`` (the two never collide)."""

    _CELL = 1 << 20

    def __init__(self, state: GameState):
        self.names = glossary(state.game)
        world = [e for e in state.entities if not e.use_abs_coords]
        rows, cols = np.nonzero(state.grid != SPACE)
        self.codes = np.concatenate([[e.type for e in world], state.grid[rows, cols] + self._CELL]).astype(
            np.int64
        )
        entity_xy = np.array([(e.x, e.y) for e in world], dtype=np.float64).reshape(-1, 2)
        self.xy = np.concatenate([entity_xy, np.stack([cols + 0.5, rows + 0.5], axis=1)])

    def code(self, kind: str) -> int:
        value = self.names.type_of(kind)
        return value + self._CELL if self.names.is_cell(kind) else value

    def nearest(self, x: float, y: float) -> dict[int, np.ndarray]:
        """Per code present, ``(dx, dy, distance)`` from ``(x, y)`` to its nearest point (the first
        in entity order, then cell order, among equally near ones)."""
        offsets = self.xy - (x, y)
        table = np.column_stack([offsets, np.hypot(offsets[:, 0], offsets[:, 1])])
        nearest = {}
        for code in np.unique(self.codes).tolist():
            candidates = np.flatnonzero(self.codes == code)
            nearest[code] = table[candidates[np.argmin(table[candidates, 2])]]
        return nearest

    def counts(self, kinds: list[str]) -> np.ndarray:
        codes, counts = np.unique(self.codes, return_counts=True)
        found = dict(zip(codes.tolist(), counts.tolist(), strict=True))
        return np.array([found.get(self.code(kind), 0) for kind in kinds])


_NONE = np.full(3, np.nan)


def features(state: GameState) -> np.ndarray:
    """``float32 (len(feature_names(game)),)``: the agent, the goal, the nearest of each kind."""
    points = _Points(state)
    agent = state.agent
    nearest = points.nearest(agent.x, agent.y)
    values = [agent.x, agent.y, agent.vx, agent.vy]
    if points.names.goal is None:
        values += [np.nan] * 3
    else:
        dx, dy, distance = nearest.get(points.code(points.names.goal), _NONE)
        values += [agent.x + dx, agent.y + dy, distance]
    for kind in points.names.feature_kinds():
        values += list(nearest.get(points.code(kind), _NONE)[:2])
    return np.array(values, dtype=np.float32)


def events(before: GameState, after: GameState) -> np.ndarray:
    """``bool (len(event_names(game)),)``: what happened in the step that led from ``before`` to ``after``."""
    step = after.header
    ended = bool(step.done)
    complete = ended and bool(step.level_complete)
    timeout = ended and not complete and before.header.cur_time + 1 >= before.header.timeout
    outcomes = [step.reward != 0, complete, ended and not complete and not timeout, timeout]
    kinds = glossary(after.game).feature_kinds()
    if ended:
        changes = np.zeros(2 * len(kinds), dtype=bool)
    else:
        delta = _Points(after).counts(kinds) - _Points(before).counts(kinds)
        changes = np.stack([delta < 0, delta > 0], axis=1).reshape(-1)
    return np.concatenate([np.array(outcomes, dtype=bool), changes])
