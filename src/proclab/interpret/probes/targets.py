"""What probes predict: the game's ground truth at every step, from a store or a rollout.

A store recorded with ground truth holds per-step ``features`` (names in the shard attribute
``ground_truth``; :mod:`proclab.envs.state.features` defines them), ``events``, and each episode's
first game state; a :class:`~proclab.record.rollout.Rollout` played with ``truth=True`` holds the same.
:class:`Truth` reads either as rows of chosen episodes, episode after episode (:class:`StoreTruth`,
:class:`RolloutTruth`), so a probe is the same computation on a recording and on a notebook's rollout. A *target* is one feature or event column by name. An *entity position* for
the spatial probes is ``agent`` (``agent_x, agent_y``), ``goal`` (``goal_x, goal_y``) or any kind with
offsets (``agent + <kind>_dx, <kind>_dy``, the nearest one), in world units, turned into pixels of
the agent's observation with :func:`proclab.envs.state.to_pixels`.

Pixels need the camera of each step. Procgen's camera is either fixed for a level or follows the
agent, so its centre is an affine function of the agent's position with per-level constants;
those are found by placing the agent at two points of the episode's first state
(:func:`~proclab.envs.state.move_agent`) and asking :func:`~proclab.envs.state.camera`, so the
camera's rules stay in one place.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from proclab.envs.state import camera, goal_names, move_agent, parse_state, to_pixels
from proclab.envs.state.goals import plan_goals
from proclab.errors import ProclabError, unknown_choice
from proclab.record.ground_truth import ground_truth_names as game_truth_names
from proclab.store import EpisodeStore
from proclab.store.schema import GROUND_TRUTH_ATTR, INITIAL_STATE, has_first_states


def ground_truth_names(store: EpisodeStore) -> dict[str, list[str]]:
    """``{"features": [...], "events": [...]}`` of a store recorded with ground truth (refused otherwise)."""
    for shard in store.shards:
        names = shard.attrs.get(GROUND_TRUTH_ATTR)
        if names:
            return names
    raise ProclabError(
        f"episode store {str(store.path)!r} holds no ground truth; record it with `proclab record` "
        "(ground truth is on by default; --no-ground-truth turns it off)"
    )


class Truth:
    """The ground truth of some episodes, as rows (episode after episode): subclasses give ``names``,
    ``lengths`` and each row's value of a column, and each episode's first game state."""

    names: dict[str, list[str]]
    lengths: np.ndarray
    game: str | None  # the one game of these episodes (None: several), for the second goal's offset

    def _column(self, field: str, col: int) -> np.ndarray:
        raise NotImplementedError

    def first_state(self, j: int) -> bytes:
        """The first game state of the ``j``-th of these episodes."""
        raise NotImplementedError

    def second_goal(self) -> str | None:
        """The place an agent may pursue instead of the level's goal (``end``, ``corner``), if the game has one."""
        names = goal_names(self.game) if self.game else ()
        return names[1] if names else None

    def derived(self) -> list[str]:
        """The targets derived beside the stored columns: the second goal's offset (module docstring)."""
        place = self.second_goal()
        return [f"{place}_dx", f"{place}_dy"] if place else []

    def values(self, name: str) -> np.ndarray:
        """The feature or event column ``name`` (or a :meth:`derived` target) at every row (float64; NaN
        where absent)."""
        for field in ("features", "events"):
            if name in self.names.get(field, []):
                return self._column(field, self.names[field].index(name)).astype(np.float64)
        if name in self.derived():  # the second goal's cell centre minus the agent's, one axis
            axis = self.derived().index(name)
            return self._second_goal_centres[axis] - self.values(("agent_x", "agent_y")[axis])
        raise unknown_choice(
            "target", name, self.names.get("features", []) + self.names.get("events", []) + self.derived()
        )

    @cached_property
    def _second_goal_centres(self) -> tuple[np.ndarray, np.ndarray]:
        """The second-goal cell's centre ``(x, y)`` at every row, read once from each episode's first state
        (each offset coordinate, and each tracked position, asks for it again)."""
        cells = []
        for j in range(len(self.lengths)):
            plan = plan_goals(parse_state(self.first_state(j)))
            assert plan is not None  # derived() names a second goal only for the games that have one
            cells.append(plan.cell)
        row, col = np.repeat(np.array(cells, np.float64).reshape(-1, 2), self.lengths.astype(np.int64), 0).T
        return col + 0.5, row + 0.5

    def entities(self) -> list[str]:
        """The entity positions the features give: agent, goal (if any), every kind with offsets, and the
        second goal's cell (if the game has one)."""
        feats = self.names["features"]
        kinds = [n.removesuffix("_dx") for n in feats if n.endswith("_dx")]
        place = [self.second_goal()] if self.second_goal() else []
        return ["agent", *(["goal"] if "goal_x" in feats else []), *kinds, *place]

    def world_positions(self, entity: str) -> tuple[np.ndarray, np.ndarray]:
        """World ``(x, y)`` of ``entity`` at every row."""
        if entity not in self.entities():
            raise unknown_choice("entity", entity, self.entities())
        ax, ay = self.values("agent_x"), self.values("agent_y")
        if entity == "agent":
            return ax, ay
        if entity == "goal":
            return self.values("goal_x"), self.values("goal_y")
        return ax + self.values(f"{entity}_dx"), ay + self.values(f"{entity}_dy")  # derived ones too

    def pixel_positions(self, entity: str) -> np.ndarray:
        """``(N, 2)`` pixel ``(px, py)`` of ``entity`` in each row's observation (NaN where there is none)."""
        x, y = self.world_positions(entity)
        ax, ay = self.world_positions("agent")
        out = np.full((len(x), 2), np.nan)
        start = 0
        for j, n in enumerate(self.lengths):
            rows = slice(start, start + int(n))
            start += int(n)
            origin = move_agent(parse_state(self.first_state(j)), (0.0, 0.0))
            c0, c1 = camera(origin), camera(move_agent(origin, (1.0, 1.0)))
            kx, ky = c1[0] - c0[0], c1[1] - c0[1]  # 1 where the camera follows the agent, 0 where it is fixed
            out[rows, 0], out[rows, 1] = to_pixels(origin, x[rows] - kx * ax[rows], y[rows] - ky * ay[rows])
        return out


class StoreTruth(Truth):
    """Episodes ``episodes`` of a store recorded with ground truth."""

    def __init__(self, store: EpisodeStore, episodes: np.ndarray):
        self.store, self.episodes = store, np.asarray(episodes)
        self.names = ground_truth_names(store)
        self.lengths = np.asarray(store.episodes["length"])[self.episodes]
        games = store.games
        self.game = games[0] if len(games) == 1 else None

    def _column(self, field: str, col: int) -> np.ndarray:
        return self.store.read_steps(field, self.episodes)[:, col]

    def first_state(self, j: int) -> bytes:
        if not has_first_states(self.store):
            raise ProclabError(
                f"episode store {str(self.store.path)!r} has no episodes' first states; record it again with "
                "ground truth"
            )
        return self.store.read_blob(INITIAL_STATE, int(self.episodes[j]))


class RolloutTruth(Truth):
    """Every episode of a rollout played with ``truth=True``, its played steps only."""

    def __init__(self, rollout):
        if not rollout.truth:
            raise ProclabError("this rollout holds no ground truth: roll out with truth=True")
        self.rollout = rollout
        self.game = rollout.game
        self.names = game_truth_names([rollout.game])
        self.lengths = rollout.lengths.numpy()
        self._order = np.nonzero(
            rollout.mask.numpy().T
        )  # (episode, step) of every row, episode after episode

    def _column(self, field: str, col: int) -> np.ndarray:
        name = self.names[field][col]
        b, t = self._order
        return self.rollout.truth[name].numpy()[t, b]

    def first_state(self, j: int) -> bytes:
        return self.rollout.start_states[j]
