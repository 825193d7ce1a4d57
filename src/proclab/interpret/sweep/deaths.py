"""Deaths by cause: which hazard killed the agent, per (variant, level) of batched paired play.

An episode *ends in death* when it ended without completing its level before the time limit (Procgen
reports a time-out as ``truncated``; every other end that does not complete the level is a death). Its
*cause* is the hazard kind nearest to the agent on the step before the fatal one: the game names its hazards
(:attr:`~proclab.envs.state.Glossary.hazards`; CoinRun: saws, walking enemies, lava), and the gap
between the agent's box and the nearest instance of each kind is measured on the game state with the
steering code's per-kind scan (:func:`proclab.record.ground_truth.kind_gaps`). A death whose nearest
hazard lies farther than ``radius`` world units is ``unclear``.

**Why the step before the fatal one.** A slot whose episode ended already shows the next level, so
the fatal step itself is never seen; the state before it is. The agent moves at most ``maxspeed``
(0.5) across and ``max_jump`` (1.5) up per step in CoinRun, so the hazard it touches next lies within
about 2 units of it (the default ``radius``).

**Why a replay, not a watch of every state.** Reading every slot's game state after every step costs
more than stepping the env (CoinRun: 72 us per slot against about 35, some 15 % of a sweep). So the
watcher keeps only each episode's actions, and once a block of levels is played, :meth:`Deaths.classify`
replays each episode that died, from its level's first frame to the step before the fatal one, in a
one-slot env (:meth:`~proclab.interpret.interventions.batched_play.ProcgenLevels.replay`): a Procgen
game state carries its random state, so the replay is the episode that was played (tested against the
states observed in play). An episode that died on its first step is classified on its first frame. A
replay that ends before its last action would not be the episode played: it stops the block with an
error rather than name a cause it cannot know.

The sweep reports, per variant, the rate of deaths (any cause, and each cause) over its levels, paired
with the baseline's on the same levels and tested as every other per-level metric
(:mod:`proclab.interpret.sweep.stats`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from proclab.envs.state import glossary
from proclab.errors import ProclabError
from proclab.record.ground_truth import kind_gaps

UNCLEAR = "unclear"
"""The cause of a death with no hazard within the radius, or of an episode never observed."""
ANY = "any"
"""The rate of deaths of every cause together."""
RADIUS = 2.0
"""World units within which the nearest hazard is named as the cause (see the module docstring)."""


class Hazards:
    """A game's hazards as the arrays :func:`kind_gaps` takes, and the cause each kind belongs to."""

    def __init__(self, game: str, radius: float = RADIUS):
        names = glossary(game)
        if not names.hazards:
            raise ProclabError(f"deaths by cause: no hazards are named for {game} (only for coinrun so far)")
        if not radius >= 0:
            raise ProclabError(f"--death-radius must be >= 0, got {radius}")
        self.causes = [*names.hazards, UNCLEAR]
        kinds = [(cause, kind) for cause, members in names.hazards.items() for kind in members]
        self.types = np.array([names.type_of(k) for _, k in kinds], np.int64)
        self.is_cell = np.array([names.is_cell(k) for _, k in kinds], bool)
        self.cause_of_kind = np.array([self.causes.index(c) for c, _ in kinds], np.int64)
        self.radius = radius

    def classify(self, data: bytes | None) -> int:
        """Index in :attr:`causes` of the hazard nearest to the agent in state ``data``; :data:`UNCLEAR`
        when none lies within the radius or there is no state (``None``)."""
        if data is None:
            return len(self.causes) - 1
        gaps = kind_gaps(data, self.types, self.is_cell)
        k = int(np.argmin(gaps))
        return int(self.cause_of_kind[k]) if gaps[k] <= self.radius else len(self.causes) - 1


class Deaths:
    """A ``watch`` of :func:`~proclab.interpret.interventions.batched_play.play` that keeps each episode's
    actions; :meth:`classify` then fills ``cause[v, l]``, the cause index of variant ``v``'s episode on
    level ``l`` if it died (:meth:`rates` keeps the deaths). ``replay(level, actions)`` gives the game
    state after ``actions`` from the first frame of ``level`` (a level seed, or a file's state index)."""

    def __init__(self, replay: Callable[[int, np.ndarray], bytes | None], game: str, radius: float = RADIUS):
        self.replay, self.hazards = replay, Hazards(game, radius)
        self.V, self.levels = 0, np.zeros(0, np.int64)
        self.cause = np.zeros((0, 0), np.int64)
        self.ended: dict[int, np.ndarray] = {}
        self._actions = np.zeros((0, 0), np.uint8)  # (slot, step) of each slot's running episode
        self._steps = np.zeros(0, np.int64)

    @property
    def causes(self) -> list[str]:
        return self.hazards.causes

    def start(self, variants: int, levels: np.ndarray) -> Deaths:
        """Forget what was seen; the next play has ``variants`` x ``levels`` episodes (``levels``: what
        :meth:`replay` takes for each)."""
        self.V, self.levels, self.ended = variants, np.asarray(levels), {}
        self.cause = np.full((variants, len(self.levels)), len(self.causes) - 1, np.int64)
        self._steps[:] = 0
        return self

    def __call__(self, rows: np.ndarray, jobs: np.ndarray, ended: np.ndarray, actions: np.ndarray) -> None:
        self._fit(rows)
        self._actions[rows, self._steps[rows]] = actions
        self._steps[rows] += 1
        for r, job in zip(rows[ended].tolist(), jobs[ended].tolist(), strict=True):
            self.ended[job] = self._actions[r, : self._steps[r]].copy()
            self._steps[r] = 0

    def _fit(self, rows: np.ndarray) -> None:
        """Grow the action buffer to hold one more action of every slot in ``rows`` (doubling the steps)."""
        extra = int(rows.max()) + 1 - len(self._steps)
        if extra > 0:  # slots not seen before
            self._steps = np.concatenate([self._steps, np.zeros(extra, np.int64)])
            self._actions = np.pad(self._actions, ((0, extra), (0, 0)))
        width = self._actions.shape[1]
        if int(self._steps[rows].max()) >= width:
            self._actions = np.pad(self._actions, ((0, 0), (0, max(width, 256))))

    def classify(self, complete: np.ndarray, timed_out: np.ndarray) -> np.ndarray:
        """Replay every episode that died (``complete`` and ``timed_out``: ``(V, L)``) up to the step before
        its fatal one and name its cause; returns ``cause``."""
        died = (np.asarray(complete) == 0) & (np.asarray(timed_out) == 0)
        for v, lv in zip(*np.nonzero(died), strict=True):
            actions = self.ended.get(int(lv) * self.V + int(v))
            if actions is None:
                continue  # not played in this block
            state = self.replay(int(self.levels[lv]), actions[:-1])
            if state is None:
                raise ProclabError(
                    f"the replay of an episode on level {int(self.levels[lv])} ended before its fatal step, so "
                    "Procgen did not replay it exactly and its cause of death is unknown; rerun with --no-deaths"
                )
            self.cause[v, lv] = self.hazards.classify(state)
        self.ended = {}
        return self.cause

    def rates(self, complete: np.ndarray, timed_out: np.ndarray) -> dict[str, np.ndarray]:
        """Per variant and level (``(V, L)`` floats, 0 or 1): died of any cause, and of each cause."""
        died = (np.asarray(complete) == 0) & (np.asarray(timed_out) == 0)
        out = {ANY: died.astype(np.float64)}
        for c, cause in enumerate(self.causes):
            out[cause] = (died & (self.cause == c)).astype(np.float64)
        return out
