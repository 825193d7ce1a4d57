"""Whether the agent went somewhere, per (variant, level), read from the game state after every step.

Called by :func:`~proclab.interpret.interventions.batched_play.play` after every env step (its
``watch``); positions are read from each slot's game state with the recorder's cheap scan
(:func:`proclab.record.ground_truth.scan`), not a full parse. A slot whose episode ended on the step
already shows the next level; it is skipped, so a touch that ends the episode (maze's cheese, a
coinrun saw) is seen only as the approach on the steps before it (hence :class:`Near`'s gap; the goal's
is also known from level completion, which the steering report adds).

* :class:`Reach`: did the agent's centre come within ``radius`` world units (half a cell by default)
  of the level's target point (retargeting).
* :class:`Near`: did the agent's box come within ``gap`` world units of any instance of each kind of
  the game's glossary (entity boxes, grid cells): per-kind reach in steering.
"""

from __future__ import annotations

import numpy as np

from proclab.envs.state import glossary
from proclab.envs.state.model import PLAYER
from proclab.envs.state.scan import scan
from proclab.record.ground_truth import kind_gaps


def _playing(states, rows: np.ndarray, jobs: np.ndarray, ended: np.ndarray, variants: int):
    """``(state bytes, level, variant)`` of every slot whose episode goes on (a job is
    ``level * variants + variant``); the slots that just ended already show the next level."""
    for r, job in zip(rows[~ended], jobs[~ended], strict=True):
        level, v = divmod(int(job), variants)
        yield states[r], level, v


def _player_xy(data: bytes) -> np.ndarray | None:
    """The agent's centre ``(x, y)`` in world units, None when the state holds no player."""
    _, entities, _ = scan(data)
    agent = entities[entities["type"] == PLAYER]
    return np.array([agent["x"][0], agent["y"][0]]) if len(agent) else None


class Reach:
    """``hit[v, l]``: variant ``v`` reached level ``l``'s target; ``states()`` gives every slot's bytes."""

    def __init__(self, states, targets: np.ndarray, variants: int, radius: float = 0.5):
        self.states, self.targets, self.V, self.radius = states, np.asarray(targets), variants, radius
        self.hit = np.zeros((variants, len(self.targets)), bool)

    def __call__(self, rows: np.ndarray, jobs: np.ndarray, ended: np.ndarray, actions: np.ndarray) -> None:
        for data, level, v in _playing(self.states(), rows, jobs, ended, self.V):
            xy = _player_xy(data)
            if xy is not None and np.all(np.abs(xy - self.targets[level]) <= self.radius):
                self.hit[v, level] = True


def near_kinds(data: bytes, types: np.ndarray, is_cell: np.ndarray, gap: float) -> np.ndarray:
    """``bool (K,)``: whether the agent's box comes within ``gap`` world units (on both axes) of a
    ``types[k]`` entity's box or grid cell (:func:`kind_gaps`)."""
    return kind_gaps(data, types, is_cell) <= gap


class Near:
    """``reached[v, l, k]``: variant ``v`` on level ``l`` came within ``gap`` of kind ``kinds[k]`` (the
    game's :meth:`~proclab.envs.state.Glossary.feature_kinds`) on some step it was seen."""

    def __init__(self, states, game: str, variants: int, levels: int, gap: float = 0.5):
        names = glossary(game)
        self.states, self.V, self.gap = states, variants, gap
        self.kinds = names.feature_kinds()
        self.types = np.array([names.type_of(k) for k in self.kinds], np.int64)
        self.is_cell = np.array([names.is_cell(k) for k in self.kinds], bool)
        self.reached = np.zeros((variants, levels, len(self.kinds)), bool)

    def __call__(self, rows: np.ndarray, jobs: np.ndarray, ended: np.ndarray, actions: np.ndarray) -> None:
        for data, level, v in _playing(self.states(), rows, jobs, ended, self.V):
            self.reached[v, level] |= near_kinds(data, self.types, self.is_cell, self.gap)


class Paths:
    """``cells[v][l]``: the grid cell ``(col, row)`` of the agent's centre after each step of variant ``v``'s
    episode on level ``l`` (steps seen before the episode ended), to compare where two variants went."""

    def __init__(self, states, variants: int, levels: int):
        self.states, self.V = states, variants
        self.cells: list[list[list[tuple[int, int]]]] = [[[] for _ in range(levels)] for _ in range(variants)]

    def __call__(self, rows: np.ndarray, jobs: np.ndarray, ended: np.ndarray, actions: np.ndarray) -> None:
        for data, level, v in _playing(self.states(), rows, jobs, ended, self.V):
            xy = _player_xy(data)
            if xy is not None:
                self.cells[v][level].append((int(np.floor(xy[0])), int(np.floor(xy[1]))))


def agreement(a: list, b: list) -> float:
    """Share of the steps both paths saw (the first ``min(len(a), len(b))``) at which they stood in the
    same cell; NaN when either saw none. 1 means the same walk for as long as both lasted."""
    n = min(len(a), len(b))
    if n == 0:
        return float("nan")
    return float(np.mean(np.all(np.asarray(a[:n]) == np.asarray(b[:n]), axis=1)))
