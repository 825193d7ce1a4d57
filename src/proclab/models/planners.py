"""Planners: policies that act from the game's ground truth towards a goal known by construction.

A planner reads each slot's procgen state (not the frames) and walks to its goal: the maze's cheese or its
top-right corner on a shortest path, CoinRun's coin or the level's end by running and jumping over what is in
the way. They are the answer key of the behavioural goal label (``proclab.interpret.goals.scripted``) and the teachers
of PPO's kickstarting (``PPOConfig.teacher``: the student is trained to press what the planner would press
in the states the student itself reaches), the cheap way to an agent that pursues a chosen goal on a CPU.

As an agent (:class:`StatePolicy`) a planner defines ``watch(env)``, which the actor
(:class:`~proclab.rl.rollout.Actor`) calls with the env it plays, and reads each row's slot state at every
step. Each row's slot travels in the policy's own state (``planner.slot``), which the actor slices with the
rows it computes, so a row knows its slot after other slots have finished. With its goal absent (the
counterfactual play of the label) a planner has nothing to plan for and stands still.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

import numpy as np
import torch
from torch import Tensor

from proclab.envs.actions import ACTION_NAMES, NUM_ACTIONS
from proclab.envs.state import end_cell, glossary
from proclab.envs.state.scan import agent_record, scan
from proclab.errors import ProclabError
from proclab.models.agent import AgentOutput
from proclab.models.edited import AgentBase
from proclab.models.scripted import ScriptedConfig, ScriptedHeads

Cell = tuple[int, int]

NOOP, LEFT, RIGHT, UP, DOWN = (ACTION_NAMES.index(n) for n in ("no-op", "left", "right", "up", "down"))
UP_LEFT, UP_RIGHT = ACTION_NAMES.index("up-left"), ACTION_NAMES.index("up-right")
SURE = 10.0
"""The chosen action's logit (the others get minus this): a sampled action is the chosen one but for
about 3e-8 of steps, so a planner plays alike sampled and greedy."""
SLOT = "planner.slot"
LEAD = 4.0
"""Steps of its present speed a CoinRun planner looks ahead (it slides on when it lets go)."""


class StatePolicy(AgentBase):
    """A policy that acts from each row's game state (the module docstring) towards ``target``, one of the
    subclass's :attr:`TARGETS`; subclasses say :meth:`act`."""

    TARGETS: tuple[str, ...] = ()

    def __init__(self, target: str):
        super().__init__()
        if target not in self.TARGETS:
            raise ValueError(f"a {type(self).__name__} walks to {' or '.join(self.TARGETS)}, not {target!r}")
        self.target = target
        self.config = ScriptedConfig()
        self.heads = ScriptedHeads()
        self.env = None

    def watch(self, env) -> None:
        self.env = env

    def goal(self, grid: np.ndarray) -> Cell | None:
        """The cell ``(row, col)`` (row 0 at the bottom) it walks to on the level's ``grid``; None where its
        target is absent."""
        raise NotImplementedError

    def act(self, data: bytes) -> int:
        """The action for the state ``data`` (procgen's bytes of the slot)."""
        raise NotImplementedError

    def cells(self, data: bytes) -> tuple[Cell, Cell | None]:
        """The agent's cell and the goal's (:meth:`goal`) in the state ``data``: where it stands and where it
        walks to, both on the level's grid."""
        _, entities, grid = scan(data)
        me = agent_record(entities)
        return (int(me["y"]), int(me["x"])), self.goal(grid)

    def actions(self, env) -> np.ndarray:
        """The action for every slot of ``env`` in its present state (a teacher's labels, one per slot)."""
        return np.array([self.act(data) for data in env.slot_states()], np.int64)

    def initial_state(self, batch: int, device=None) -> dict[str, Tensor]:
        return {SLOT: torch.arange(batch, dtype=torch.float32, device=device)[:, None]}

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return {SLOT: (1,)}

    def step(self, obs: Tensor, state, first: Tensor, prev_reward: Tensor | None = None):
        if self.env is None:
            raise RuntimeError("a state policy acts only where an actor gave it its env (watch)")
        slots = state[SLOT][:, 0].long().tolist()
        actions = [self.act(self.env.slot_state(s)) for s in slots]
        logits = torch.full((len(slots), NUM_ACTIONS), -SURE, device=obs.device)
        logits[torch.arange(len(slots)), actions] = SURE
        value = torch.zeros(len(slots), device=obs.device)
        return AgentOutput(self.heads.hook_logits(logits), self.heads.hook_value(value)), state

    def unroll(self, obs: Tensor, state, firsts: Tensor, prev_rewards: Tensor | None = None):
        raise NotImplementedError("a state policy acts step by step from live game states")


def tree_towards(root: Cell, neighbours: Callable[[Cell], Iterable[Cell]]) -> dict[Cell, Cell | None]:
    """Every cell reachable from ``root`` with its parent in a breadth-first search from ``root``: the next cell
    of a shortest path towards ``root`` (``root``'s own is None); cells in breadth-first order."""
    parents: dict[Cell, Cell | None] = {root: None}
    queue = deque([root])
    while queue:
        cell = queue.popleft()
        for n in neighbours(cell):
            if n not in parents:
                parents[n] = cell
                queue.append(n)
    return parents


# -- Maze ---------------------------------------------------------------------------------------------
_MAZE_MOVES = ((UP, 1, 0), (DOWN, -1, 0), (LEFT, 0, -1), (RIGHT, 0, 1))
_CHEESE = glossary("maze").type_of("cheese")
_MAZE_WALL = glossary("maze").type_of("wall")


class MazePlanner(StatePolicy):
    """Walks a shortest path of the maze to ``target``: ``"corner"`` (the top-right cell, fixed) or
    ``"cheese"`` (wherever it lies; with no cheese it stands still)."""

    TARGETS = ("corner", "cheese")

    def goal(self, grid: np.ndarray) -> Cell | None:
        if self.target == "cheese":
            found = np.argwhere(grid == _CHEESE)
            return (int(found[0][0]), int(found[0][1])) if len(found) else None
        # the maze is centred in a frame of wall, its top-right cell open (corner_cell)
        rows, cols = np.nonzero(grid != _MAZE_WALL)
        return int(rows.max()), int(cols.max())

    def act(self, data: bytes) -> int:
        _, entities, grid = scan(data)
        goal = self.goal(grid)
        if goal is None:
            return NOOP
        me = agent_record(entities)
        return first_move(grid != _MAZE_WALL, (int(me["y"]), int(me["x"])), goal)


def first_move(open_: np.ndarray, start: tuple[int, int], goal: tuple[int, int]) -> int:
    """The first action of a shortest path from cell ``start`` to ``goal`` (``(row, col)``, row 0 at the
    bottom) over the open cells; no-op at the goal or where none leads there."""
    cells = {(int(r), int(c)) for r, c in np.argwhere(open_)}

    def neighbours(cell: tuple[int, int]) -> list[tuple[int, int]]:
        return [n for _, dr, dc in _MAZE_MOVES if (n := (cell[0] + dr, cell[1] + dc)) in cells]

    step = tree_towards(goal, neighbours).get(start) if start != goal else None
    if step is None:
        return NOOP
    return next(a for a, dr, dc in _MAZE_MOVES if (start[0] + dr, start[1] + dc) == step)


# -- CoinRun ------------------------------------------------------------------------------------------
_CR = glossary("coinrun")
_COIN = _CR.type_of("coin")
_SOLID = np.array([_CR.type_of("wall_mid"), _CR.type_of("wall_top")])
_LAVA = np.array([_CR.type_of(k) for k in _CR.hazards["lava"]])
_HAZARDS = np.array([_CR.type_of(k) for k in (*_CR.hazards["saw"], *_CR.hazards["enemy"])])


class CoinRunPlanner(StatePolicy):
    """Walks to ``target`` on CoinRun's ground truth: ``"coin"`` (wherever it lies; with no coin it stands
    still) or ``"end"``, the level's end cell (:func:`~proclab.envs.state.end_cell`, where an unedited level
    has its coin); towards the target's column, jumping over a step, a gap, lava, a saw or an enemy ahead,
    and up to a target above it. On the way to the end it takes a coin that lies in its path, as any
    runner would; with ``avoid_coin`` it jumps over one as over a saw (an end-seeker that steers around an
    unpaid coin: what an agent paid only at the end, whose coin ends the episode unpaid, learns to do)."""

    TARGETS = ("coin", "end")

    def __init__(self, target: str, avoid_coin: bool = False):
        super().__init__(target)
        if avoid_coin and target == "coin":
            raise ValueError("a planner cannot walk to the coin and avoid it")
        self.avoid_coin = avoid_coin

    def goal(self, grid: np.ndarray) -> Cell | None:
        if self.target == "coin":
            found = np.argwhere(grid == _COIN)
            return (int(found[0][0]), int(found[0][1])) if len(found) else None
        row, col = end_cell(grid)
        return int(row), int(col)

    def act(self, data: bytes) -> int:
        _, entities, grid = scan(data)
        goal = self.goal(grid)
        if goal is None:
            return NOOP
        row, col = goal
        me = agent_record(entities)
        x, y, vx, rx, ry = (float(me[k]) for k in ("x", "y", "vx", "rx", "ry"))
        dx = col + 0.5 - x
        lead = dx - LEAD * vx  # where it would stand if it let go now: brake before, not past, the target
        way = 1 if lead > 0.25 else -1 if lead < -0.25 else 0
        feet = int(y - ry + 0.01)
        jump = row > feet and abs(dx) < 2.5
        if way:
            ahead = int(x + way * (rx + 0.6))
            below = grid[max(feet - 3, 0) : feet, ahead] if 0 <= ahead < grid.shape[1] else grid[:0, 0]
            near = entities[np.isin(entities["type"], _HAZARDS)]
            jump |= bool(np.isin(grid[feet, ahead], _SOLID))  # a step up
            jump |= not np.isin(below, _SOLID).any() or bool(np.isin(below, _LAVA).any())  # a gap or lava
            jump |= _close_ahead(near["x"], near["y"], x, y, way)  # a saw or enemy
            if self.avoid_coin:  # a coin on its way, as a saw: its cell's centre
                coins = np.argwhere(grid == _COIN)
                jump |= _close_ahead(coins[:, 1] + 0.5, coins[:, 0] + 0.5, x, y, way)
        if jump:
            return {1: UP_RIGHT, -1: UP_LEFT, 0: UP}[way]
        return {1: RIGHT, -1: LEFT, 0: NOOP}[way]


def _close_ahead(xs: np.ndarray, ys: np.ndarray, x: float, y: float, way: int) -> bool:
    """Whether any of the things at ``xs``, ``ys`` lies less than 2.5 cells ahead of the agent at ``x``, ``y``
    walking ``way`` (+1 right, -1 left), within 1.5 cells of its height: close enough to jump over."""
    gap = way * (xs - x)
    return bool(((gap > 0) & (gap < 2.5) & (np.abs(ys - y) < 1.5)).any())


# -- by name ------------------------------------------------------------------------------------------
PLANNERS: dict[str, tuple[str, Callable[[], StatePolicy]]] = {
    "coin-planner": ("coinrun", lambda: CoinRunPlanner("coin")),
    "end-planner": ("coinrun", lambda: CoinRunPlanner("end")),
    "cheese-planner": ("maze", lambda: MazePlanner("cheese")),
    "corner-planner": ("maze", lambda: MazePlanner("corner")),
}
"""Name -> (the game it plays, how to make it): the teachers ``PPOConfig.teacher`` names."""


def planner(name: str, game: str) -> StatePolicy:
    """The planner ``name`` of :data:`PLANNERS` for ``game``; a one-line error for another name or game."""
    if name not in PLANNERS:
        raise ProclabError(f"teacher {name!r} is not a planner; choose one of {', '.join(PLANNERS)}")
    plays, make = PLANNERS[name]
    if plays != game:
        raise ProclabError(f"teacher {name!r} plays {plays}, not {game}")
    return make()
