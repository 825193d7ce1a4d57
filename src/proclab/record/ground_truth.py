"""Ground truth per recorded step: the game's features and events, read from procgen's states cheaply.

:func:`proclab.envs.state.features` and :func:`~proclab.envs.state.events` define the numbers (names,
order, NaN for "none", the events' rules); this module computes the same numbers for every env slot
at every step without building a :class:`~proclab.envs.state.GameState`: it walks procgen's byte
layout (the field specs of :mod:`proclab.envs.state.layout`) only to the few places it needs (the
step's outcome in the header, the entity records, the grid), reads each state's entities as one numpy
record array, finds the nearest entity of every kind for all states in one pass, and the nearest cell
of every kind from one distance grid per state (rows and columns are separable), all states of a grid
shape at once; a slot's grid, as kind indices, is kept while it does not change.
Each episode's goals (CoinRun's coin and end, Maze's cheese and corner) come from
:class:`proclab.envs.state.GoalTracker`, fed the same states.
``tests/record/test_ground_truth.py`` checks it against the definitions on random states of all 16
games, and row by row against a replayed recording.

Multi-task recordings store one width for all games: the union of the games' names (first game's
first), NaN / false where a game has no such feature or event.

On an episode's last step the state after the step is already the next level's (procgen resets
inside the step), so the last row's outcome events (``reward``, ``level_complete``, ``died``,
``timeout``) come from the env's own step results, and its per-kind events are false, as the
definitions say; with ``--levels-from`` the next state is a file's, which would otherwise be read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proclab.envs.state import GoalTracker, event_names, feature_names, glossary, goal_names, parse_state
from proclab.envs.state.model import PLAYER
from proclab.envs.state.scan import HEADER_WANTED, scan
from proclab.store.schema import GOAL

_OUTCOMES = ("reward", "level_complete", "died", "timeout")


@dataclass(frozen=True)
class Seen:
    """Several states (one per env slot) as the ground truth needs them."""

    header: dict[str, np.ndarray]
    """The step's outcome fields per state (reward, done, level_complete, cur_time, timeout)."""
    features: np.ndarray
    """``float32 (N, len(feature_names))``."""
    counts: np.ndarray
    """``(N, kinds)``: how many of each feature kind each state holds."""


def _first_nearest(group: np.ndarray, distance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each group present: its id and the index of its smallest distance (the first listed of equals).

    A stable sort by group keeps each group's points in their original order, so the first point that
    reaches the group's minimum is the first listed one (the points come nearly sorted: cheap)."""
    order = np.argsort(group.astype(np.int32), kind="stable")
    sorted_group, sorted_distance = group[order], distance[order]
    starts = np.flatnonzero(np.r_[True, sorted_group[1:] != sorted_group[:-1]])
    if len(order) == 0:
        return order, order
    least = np.minimum.reduceat(sorted_distance, starts)
    at_least = sorted_distance == np.repeat(least, np.diff(np.r_[starts, len(order)]))
    hits = np.flatnonzero(at_least)
    first = hits[np.searchsorted(hits, starts)]  # the first hit at or after each group's start
    return sorted_group[starts], order[first]


class GameTruth:
    """One game's features and events of many states at once (see the module docstring)."""

    def __init__(self, game: str):
        names = glossary(game)
        self.game = game
        self.kinds = names.feature_kinds()
        self.feature_names, self.event_names = feature_names(game), event_names(game)
        top = max([*names.entities, *names.cells, 0]) + 1
        self.entity_kind = np.full(top, -1, np.int64)
        self.cell_kind = np.full(top, -1, np.int64)
        for k, kind in enumerate(self.kinds):
            value = names.type_of(kind)
            (self.cell_kind if names.is_cell(kind) else self.entity_kind)[value] = k
        self.goal = self.kinds.index(names.goal) if names.goal is not None else -1
        self.num_kinds = len(self.kinds)
        self.cell_kinds = sorted({int(k) for k in self.cell_kind if k >= 0})
        self._cache: dict = {}  # key -> (grid bytes, grid as kind indices, cells per kind)

    @staticmethod
    def _kind_of(table: np.ndarray, values: np.ndarray) -> np.ndarray:
        inside = (values >= 0) & (values < len(table))
        return np.where(inside, table[np.clip(values, 0, len(table) - 1)], -1)

    def _cells(self, grid: np.ndarray, key) -> tuple[np.ndarray, np.ndarray]:
        """The grid as feature-kind indices (``-1``: none) and the count of each kind's cells.

        A level's grid seldom changes from one step to the next (a coin taken, a wall dug), so with a
        ``key`` (the env slot) the result is kept and reused while the slot's grid stays the same."""
        raw = bytes(grid.data)
        cached = self._cache.get(key)
        if cached is not None and cached[0] == raw:
            return cached[1], cached[2]
        kinds = self._kind_of(self.cell_kind, grid.astype(np.int64))
        found = (kinds, np.bincount(kinds[kinds >= 0], minlength=self.num_kinds))
        if key is not None:
            self._cache[key] = (raw, *found)
        return found

    def _entities(self, scans: list):
        """Group (state x kind) and world centre of every entity of a feature kind (list order; screen-fixed
        ones left out), and each state's agent record."""
        groups, points, agents = [], [], []
        for i, (_, entities, _) in enumerate(scans):
            agents.append(entities[np.flatnonzero(entities["type"] == PLAYER)[0]])
            kind = self._kind_of(self.entity_kind, entities["type"].astype(np.int64))
            e = np.flatnonzero((kind >= 0) & (entities["use_abs_coords"] == 0))
            groups.append(i * self.num_kinds + kind[e])
            points.append(np.stack([entities["x"][e], entities["y"][e]], axis=1).astype(np.float64))
        return np.concatenate(groups), np.concatenate(points), np.array(agents)

    def _nearest_cells(
        self, grids: list[np.ndarray], ax: np.ndarray, ay: np.ndarray, nearest: np.ndarray
    ) -> None:
        """Fill ``nearest[i, k]`` with ``(dx, dy, distance)`` to the nearest cell of each cell kind ``k``: one
        distance grid per state (rows and columns are separable), states of one grid shape at once; of
        equally near cells the first in row-major order, as the definitions take it."""
        shapes: dict[tuple, list[int]] = {}
        for i, g in enumerate(grids):
            shapes.setdefault(g.shape, []).append(i)
        for (height, width), states in shapes.items():
            kinds = np.stack([grids[i] for i in states]).reshape(len(states), -1)
            dx = (np.arange(width) + 0.5)[None, :] - ax[states, None]
            dy = (np.arange(height) + 0.5)[None, :] - ay[states, None]
            distance = np.hypot(dx[:, None, :], dy[:, :, None]).reshape(len(states), -1)
            for k in self.cell_kinds:
                masked = np.where(kinds == k, distance, np.inf)
                best = masked.argmin(axis=1)
                value = masked[np.arange(len(states)), best]
                have = np.flatnonzero(value < np.inf)
                row, col = np.divmod(best[have], width)
                nearest[np.asarray(states)[have], k] = np.stack(
                    [dx[have, col], dy[have, row], value[have]], axis=1
                )

    def see(self, states: list[bytes], keys: list | None = None) -> Seen:
        """What the ground truth needs of ``states``: outcome fields, features and counts per kind.

        ``keys`` (one per state, e.g. its env slot) let a state reuse the grid reading of the previous
        state under the same key when the grid did not change."""
        scans = [scan(data) for data in states]
        N, K = len(scans), self.num_kinds
        group, xy, agent = self._entities(scans)
        ax, ay = agent["x"].astype(np.float64), agent["y"].astype(np.float64)
        offsets = xy - np.stack([ax, ay], axis=1)[group // K]
        distance = np.hypot(offsets[:, 0], offsets[:, 1])
        found, first = _first_nearest(group, distance)
        nearest = np.full((N * K, 3), np.nan)
        nearest[found] = np.column_stack([offsets[first], distance[first]])
        nearest = nearest.reshape(N, K, 3)
        cells = [self._cells(grid, key) for (_, _, grid), key in zip(scans, keys or [None] * N, strict=True)]
        self._nearest_cells([c[0] for c in cells], ax, ay, nearest)
        goal = (
            np.full((N, 3), np.nan)
            if self.goal < 0
            else nearest[:, self.goal] + np.stack([ax, ay, 0 * ax], 1)
        )
        agent_part = np.stack(
            [ax, ay, agent["vx"].astype(np.float64), agent["vy"].astype(np.float64)], axis=1
        )
        features = np.concatenate([agent_part, goal, nearest[:, :, :2].reshape(N, 2 * K)], axis=1)
        header = {name: np.array([h[name] for h, _, _ in scans]) for name in HEADER_WANTED}
        counts = np.bincount(group, minlength=N * K).reshape(N, K) + np.stack([c[1] for c in cells])
        return Seen(header, features.astype(np.float32), counts)

    def events(self, before: Seen, after: Seen) -> np.ndarray:
        """``bool (N, len(event_names))``: the events of the steps from ``before`` to ``after`` (state by
        state, as :func:`proclab.envs.state.events` defines them)."""
        ended = after.header["done"] != 0
        complete = ended & (after.header["level_complete"] != 0)
        timeout = ended & ~complete & (before.header["cur_time"] + 1 >= before.header["timeout"])
        outcomes = [after.header["reward"] != 0, complete, ended & ~complete & ~timeout, timeout]
        delta = after.counts - before.counts
        changes = np.stack([delta < 0, delta > 0], axis=2) & ~ended[:, None, None]
        return np.concatenate([np.stack(outcomes, axis=1), changes.reshape(len(delta), -1)], axis=1)


def ground_truth_names(games) -> dict:
    """The stored ``features`` and ``events`` columns of a recording of ``games`` (see the module docstring),
    and its ``goals``: per game that has goals, their names (the episodes' ``goal/<name>`` fields are their
    union, false for a game without that goal)."""
    return {
        "features": union(feature_names(g) for g in games),
        "events": union(event_names(g) for g in games),
        "goals": {g: list(goal_names(g)) for g in games if goal_names(g)},
    }


def goal_fields(games) -> list[str]:
    """The per-episode ``goal/<name>`` fields of a recording of ``games`` with ground truth."""
    return [GOAL + name for name in union(goal_names(g) for g in games)]


def union(lists) -> list[str]:
    """The names of several games in one list: first game's first, then each new one as it appears."""
    return list(dict.fromkeys(name for names in lists for name in names))


class GroundTruth:
    """Features and events of every slot of a vector env, step after step, and each episode's first state.

    ``env`` follows :class:`~proclab.envs.ProcgenVecEnv` (``games``, ``game_index``,
    ``slot_states()``); it must have been reset. Call :meth:`features` before each step and
    :meth:`step` after it; :attr:`finished` then holds, for the slots whose episode just ended, that
    episode's first state (procgen's bytes, parsed in full once to refuse what this proclab cannot read),
    and :attr:`finished_goals` its goals (:mod:`proclab.envs.state.goals`: CoinRun's coin and end, Maze's
    cheese and corner; every goal of the env's games, false where the slot's game has no such goal).
    """

    def __init__(self, env):
        self.env = env
        self.truths = [GameTruth(game) for game in env.games]
        self.feature_names = union(t.feature_names for t in self.truths)
        self.event_names = union(t.event_names for t in self.truths)
        self._slots = [np.flatnonzero(env.game_index == g) for g in range(len(self.truths))]
        self._feature_cols = [[self.feature_names.index(n) for n in t.feature_names] for t in self.truths]
        self._event_cols = [[self.event_names.index(n) for n in t.event_names] for t in self.truths]
        self._outcomes = [self.event_names.index(n) for n in _OUTCOMES]
        states = env.slot_states()
        self.first = [_checked(data) for data in states]
        self.finished: dict[int, bytes] = {}
        self.goals = GoalTracker(env.games, env.game_index, states)
        self.finished_goals: dict[int, dict[str, bool]] = {}
        self._seen = self._see(states)

    def _see(self, states: list[bytes]) -> list[Seen]:
        return [
            t.see([states[i] for i in slots], keys=list(slots))
            for t, slots in zip(self.truths, self._slots, strict=True)
        ]

    def features(self) -> np.ndarray:
        """``float32 (N, len(feature_names))`` of the current states (NaN where a slot's game has none)."""
        out = np.full((self.env.num_envs, len(self.feature_names)), np.nan, np.float32)
        for seen, slots, cols in zip(self._seen, self._slots, self._feature_cols, strict=True):
            out[np.ix_(slots, cols)] = seen.features
        return out

    def step(self, reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, complete: np.ndarray):
        """``bool (N, len(event_names))``: the events of the step just taken (see the module docstring for
        episode ends, whose outcomes are the env's ``reward``, ``terminated``, ``truncated``, ``complete``)."""
        states = self.env.slot_states()
        seen = self._see(states)
        out = np.zeros((self.env.num_envs, len(self.event_names)), bool)
        for before, after, truth, slots, cols in zip(
            self._seen, seen, self.truths, self._slots, self._event_cols, strict=True
        ):
            out[np.ix_(slots, cols)] = truth.events(before, after)
        ended = np.flatnonzero(terminated | truncated)
        out[ended] = False
        out[np.ix_(ended, self._outcomes)] = np.stack(
            [reward != 0, complete, terminated & ~complete, truncated], axis=1
        )[ended]
        self.finished = {int(i): self.first[i] for i in ended}
        reached = self.goals.step(states, terminated | truncated, complete)
        self.finished_goals = {int(i): self.goals.row(reached.get(i, {})) for i in ended}
        for i in ended:
            self.first[i] = _checked(states[i])
        self._seen = seen
        return out


def _checked(data: bytes) -> bytes:
    """``data`` after a full parse (a one-line error for a state this proclab cannot read)."""
    parse_state(data)
    return data


def kind_gaps(data: bytes, types: np.ndarray, is_cell: np.ndarray) -> np.ndarray:
    """``float (K,)``: the gap in world units between the agent's box and the nearest ``types[k]`` entity
    box (``is_cell[k]`` false) or grid cell (true; cell ``(row, col)`` is the unit square at ``(col,
    row)``), measured as the larger of the two axes' gaps (negative when the boxes overlap); ``inf`` where
    the state has none (or no agent). Entities in screen coordinates are not in the world and never near."""
    _, entities, grid = scan(data)
    out = np.full(len(types), np.inf)
    me = entities[entities["type"] == PLAYER]
    if not len(me):
        return out
    x, y, rx, ry = (float(me[f][0]) for f in ("x", "y", "rx", "ry"))
    world = entities[(entities["type"] != PLAYER) & (entities["use_abs_coords"] == 0)]
    gx = np.abs(world["x"].astype(np.float64) - x) - rx - world["rx"]
    gy = np.abs(world["y"].astype(np.float64) - y) - ry - world["ry"]
    _nearest(out, ~is_cell, types, world["type"], np.maximum(gx, gy))
    if is_cell.any():  # cell c spans [c, c + 1]: its centre c + 0.5, half-extent 0.5 on both axes
        h, w = grid.shape
        cx = np.abs(np.arange(w) + 0.5 - x) - rx - 0.5
        cy = np.abs(np.arange(h) + 0.5 - y) - ry - 0.5
        wanted = np.isin(grid, types[is_cell])
        rows, cols = np.nonzero(wanted)
        _nearest(out, is_cell, types, grid[rows, cols], np.maximum(cy[rows], cx[cols]))
    return out


def _nearest(
    out: np.ndarray, which: np.ndarray, types: np.ndarray, found: np.ndarray, gap: np.ndarray
) -> None:
    """``out[k]`` (for ``which[k]``): the smallest ``gap`` among the ``found`` instances of ``types[k]``."""
    for k in np.flatnonzero(which):
        hit = gap[found == types[k]]
        if len(hit):
            out[k] = float(hit.min())
