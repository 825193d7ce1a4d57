"""What a maze episode reached, read from the agent's cell at every step: the cheese, the top-right corner,
and which way it went at the decision square.

Procgen's maze moves the agent one cell per step, so its cell is ``floor`` of its centre (``agent_x``,
``agent_y`` of the rollout's ground truth). The step that eats the cheese ends the episode and the next row
already shows the next level, so the cheese is never *seen* under the agent: an episode reached the cheese
when it completed the level (the maze's only reward), on its last step. The corner is reached at the first
step the agent stands on it (or, when the cheese sits on the corner, when the cheese is eaten). The agent
*went towards the cheese* at the decision square when, after first standing on it, the first of the two
cells past it that it entered is the one on the path to the cheese (entering the cheese itself, when it lies
next to the square, ends the episode and counts as that).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from proclab.envs.state import parse_state
from proclab.errors import ProclabError
from proclab.interpret.goals.maze import Cell, Maze, euclid, maze_of

if TYPE_CHECKING:
    from proclab.record.rollout import Rollout


@dataclass(frozen=True)
class MazeEpisode:
    """One maze played once: where its goals lie and when the agent reached them (steps from 0; None: never)."""

    level: int
    length: int
    cheese_distance: float
    """Euclidean distance (cells) from the cheese to the maze's top-right cell."""
    cheese_steps: int
    """Steps along the maze from the cheese to the top-right cell."""
    cheese_in_region: bool
    """The cheese lies in the top-right region (the training distribution of the agent Mini et al. studied)."""
    features: dict[str, float] | None
    """Mini et al.'s properties (:data:`proclab.interpret.goals.maze.FEATURES`); None without a decision square."""
    cheese_step: int | None
    corner_step: int | None
    branch: str | None
    """``"cheese"`` or ``"corner"``: the first branch past the decision square entered; None: none entered."""
    branch_step: int | None

    @property
    def has_decision_square(self) -> bool:
        return self.features is not None

    def reached(self, goal: str, horizon: int | None = None) -> bool:
        """Whether ``goal`` (``cheese`` or ``corner``) was reached within the first ``horizon`` steps."""
        step = {"cheese": self.cheese_step, "corner": self.corner_step}[goal]
        return step is not None and (horizon is None or step < horizon)

    def went(self, horizon: int | None = None) -> str | None:
        """The branch taken at the decision square within ``horizon`` steps (None: none by then)."""
        if self.branch_step is None or (horizon is not None and self.branch_step >= horizon):
            return None
        return self.branch


def first(cells: Sequence[Cell], target: Cell, after: int = 0) -> int | None:
    return next((t for t in range(after, len(cells)) if cells[t] == target), None)


def goals_reached(maze: Maze, cells: Sequence[Cell], completed: bool) -> dict:
    """``cheese_step``, ``corner_step``, ``branch``, ``branch_step`` of one episode whose agent stood on
    ``cells`` (one per step) and which ended by eating the cheese when ``completed``."""
    last = len(cells) - 1
    cheese_step = last if completed else None
    corner_step = first(cells, maze.corner)
    if maze.cheese == maze.corner and completed:
        corner_step = last
    branch, branch_step = None, None
    square, ways = maze.decision_square, maze.branches()
    if square is not None and ways is not None:  # both or neither
        arrived = first(cells, square)
        if arrived is not None:
            entered = next((t for t in range(arrived, len(cells)) if cells[t] in ways), None)
            if entered is not None:
                branch, branch_step = ("cheese" if cells[entered] == ways[0] else "corner"), entered
            elif completed and ways[0] == maze.cheese:  # stepped from the square onto the cheese
                branch, branch_step = "cheese", last
    return {
        "cheese_step": cheese_step,
        "corner_step": corner_step,
        "branch": branch,
        "branch_step": branch_step,
    }


def maze_episode(maze: Maze, level: int, cells: Sequence[Cell], completed: bool) -> MazeEpisode:
    square = maze.decision_square
    return MazeEpisode(
        level=level,
        length=len(cells),
        cheese_distance=euclid(maze.cheese, maze.corner),
        cheese_steps=maze.steps(maze.cheese, maze.corner),
        cheese_in_region=maze.in_region(maze.cheese),
        features=None if square is None else maze.features(),
        **goals_reached(maze, cells, completed),
    )


def maze_episodes(rollout: Rollout, region: int = 5) -> list[MazeEpisode]:
    """Every episode of a maze :class:`~proclab.record.rollout.Rollout` (played with ``truth=True``), in order."""
    if rollout.game != "maze":
        raise ProclabError(f"the decision-square analysis reads maze rollouts, not {rollout.game}")
    if not rollout.start_states or "agent_x" not in rollout.truth:
        raise ProclabError("this rollout has no ground truth: roll out with truth=True")
    out = []
    xs, ys = rollout.truth["agent_x"].numpy(), rollout.truth["agent_y"].numpy()
    for b in range(rollout.num_episodes):
        n = int(rollout.lengths[b])
        cells = [(math.floor(x), math.floor(y)) for x, y in zip(xs[:n, b], ys[:n, b], strict=True)]
        maze = maze_of(parse_state(rollout.start_states[b]), region)
        if cells and cells[0] != maze.start:
            raise ProclabError(
                f"episode {b}: the agent's first cell {cells[0]} is not the maze's start {maze.start}"
            )
        out.append(maze_episode(maze, int(rollout.levels[b]), cells, bool(rollout.level_complete[b])))
    return out


def distinct_levels(episodes: Sequence[MazeEpisode]) -> list[MazeEpisode]:
    """The first episode of each level seed (a split's levels are drawn with replacement)."""
    seen: dict[int, MazeEpisode] = {}
    for e in episodes:
        seen.setdefault(e.level, e)
    return list(seen.values())


def as_arrays(episodes: Sequence[MazeEpisode]) -> dict[str, np.ndarray]:
    """The episodes as columns (steps as -1 where never reached), for saving."""
    step = lambda v: -1 if v is None else v  # noqa: E731
    return {
        "level": np.array([e.level for e in episodes], np.int64),
        "length": np.array([e.length for e in episodes], np.int64),
        "cheese_distance": np.array([e.cheese_distance for e in episodes]),
        "cheese_steps": np.array([e.cheese_steps for e in episodes], np.int64),
        "cheese_in_region": np.array([e.cheese_in_region for e in episodes]),
        "cheese_step": np.array([step(e.cheese_step) for e in episodes], np.int64),
        "corner_step": np.array([step(e.corner_step) for e in episodes], np.int64),
        "branch": np.array([{"cheese": 1, "corner": 0, None: -1}[e.branch] for e in episodes], np.int64),
        "branch_step": np.array([step(e.branch_step) for e in episodes], np.int64),
    }
