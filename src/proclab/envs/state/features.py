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

from proclab.envs.state.glossary import glossary
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
    return _Positions(state)(kind)


class _Positions:
    """Positions by kind for one state; the entity table is built once, not once per kind."""

    def __init__(self, state: GameState):
        self.state = state
        self.names = glossary(state.game)
        world = [e for e in state.entities if not e.use_abs_coords]
        self.types = np.array([e.type for e in world], dtype=np.int64)
        self.xy = np.array([(e.x, e.y) for e in world], dtype=np.float64).reshape(-1, 2)

    def __call__(self, kind: str) -> np.ndarray:
        value = self.names.type_of(kind)
        if self.names.is_cell(kind):
            rows, cols = np.nonzero(self.state.grid == value)
            return np.stack([cols + 0.5, rows + 0.5], axis=1)
        return self.xy[self.types == value]

    def nearest(self, kind: str, x: float, y: float) -> np.ndarray:
        """``(dx, dy, distance)`` from ``(x, y)`` to the nearest ``kind`` (the first in entity order, or
        cell order, among equally near ones); NaNs when there is none."""
        if self.names.is_cell(kind):
            return self._nearest_cell(self.names.type_of(kind), x, y)
        points = self(kind)
        if len(points) == 0:
            return _NONE
        offsets = points - (x, y)
        distances = np.hypot(offsets[:, 0], offsets[:, 1])
        best = int(np.argmin(distances))
        return np.array([*offsets[best], distances[best]])

    def _nearest_cell(self, value: int, x: float, y: float) -> np.ndarray:
        """Over the whole grid at once: a coinrun level holds thousands of wall cells."""
        if getattr(self, "_origin", None) != (x, y):
            height, width = self.state.grid.shape
            self._dx = np.arange(width) + 0.5 - x
            self._dy = np.arange(height) + 0.5 - y
            self._distance = np.hypot(self._dx[None, :], self._dy[:, None])
            self._origin = (x, y)
        masked = np.where(self.state.grid == value, self._distance, np.inf)
        row, col = np.unravel_index(int(np.argmin(masked)), masked.shape)
        if masked[row, col] == np.inf:
            return _NONE
        return np.array([self._dx[col], self._dy[row], masked[row, col]])


_NONE = np.full(3, np.nan)


def _counts(state: GameState, kinds: list[str]) -> np.ndarray:
    found = _Positions(state)
    return np.array([len(found(kind)) for kind in kinds])


def features(state: GameState) -> np.ndarray:
    """``float32 (len(feature_names(game)),)``: the agent, the goal, the nearest of each kind."""
    found = _Positions(state)
    agent = state.agent
    values = [agent.x, agent.y, agent.vx, agent.vy]
    if found.names.goal is None:
        values += [np.nan] * 3
    else:
        dx, dy, distance = found.nearest(found.names.goal, agent.x, agent.y)
        values += [agent.x + dx, agent.y + dy, distance]
    for kind in found.names.feature_kinds():
        values += list(found.nearest(kind, agent.x, agent.y)[:2])
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
        delta = _counts(after, kinds) - _counts(before, kinds)
        changes = np.stack([delta < 0, delta > 0], axis=1).reshape(-1)
    return np.concatenate([np.array(outcomes, dtype=bool), changes])
