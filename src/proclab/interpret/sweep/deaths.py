"""Deaths by cause: which hazard killed the agent, per (variant, level) of batched paired play.

An episode *ends in death* when it ended without completing its level before the time limit (Procgen
reports a time-out as ``truncated``; every other end that does not complete the level is a death). Its
*cause* is the hazard kind nearest to the agent on its last observed step: the game names its hazards
(:attr:`~proclab.envs.state.Glossary.hazards`; CoinRun: saws, walking enemies, lava), and the gap
between the agent's box and the nearest instance of each kind is measured on the game state with the
steering code's per-kind scan (:func:`proclab.interpret.steering.reach.kind_gaps`). A death whose nearest
hazard lies farther than ``radius`` world units, or whose episode was never observed (it ended on its
first step), is ``unclear``.

**Why the last observed step.** The watcher of :func:`~proclab.interpret.interventions.batched_play.play`
sees each slot's state after every step, but a slot whose episode ended already shows the next level:
the fatal step itself is never seen. The step before it is, and the agent moves at most ``maxspeed``
(0.5) across and ``max_jump`` (1.5) up per step in CoinRun, so the hazard it touches next lies within
about 2 units of it (the default ``radius``). Each slot keeps the bytes of its last observed state only
(tagged with its episode), and classifies them once, when the episode ends.

The sweep reports, per variant, the rate of deaths (any cause, and each cause) over its levels, paired
with the baseline's on the same levels and tested as every other per-level metric
(:mod:`proclab.interpret.sweep.stats`).
"""

from __future__ import annotations

import numpy as np

from proclab.envs.state import glossary
from proclab.errors import ProclabError
from proclab.interpret.steering.reach import kind_gaps

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
        """Index in :attr:`causes` of the hazard nearest to the agent in state ``data`` (``None``: never
        observed), :data:`UNCLEAR` when none lies within the radius."""
        if data is None:
            return len(self.causes) - 1
        gaps = kind_gaps(data, self.types, self.is_cell)
        k = int(np.argmin(gaps))
        return int(self.cause_of_kind[k]) if gaps[k] <= self.radius else len(self.causes) - 1


class Deaths:
    """A ``watch`` of :func:`~proclab.interpret.interventions.batched_play.play`: ``cause[v, l]``, the cause
    index of variant ``v``'s episode on level ``l`` as if it died (:meth:`rates` keeps the deaths).
    ``states()`` gives every slot's state bytes after a step."""

    def __init__(self, states, game: str, radius: float = RADIUS):
        self.states, self.hazards = states, Hazards(game, radius)
        self.V = 0
        self.cause = np.zeros((0, 0), np.int64)
        self.last: dict[int, tuple[int, bytes]] = {}

    @property
    def causes(self) -> list[str]:
        return self.hazards.causes

    def start(self, variants: int, levels: int) -> Deaths:
        """Forget what was seen; the next play has ``variants`` x ``levels`` episodes."""
        self.V, self.last = variants, {}
        self.cause = np.full((variants, levels), len(self.causes) - 1, np.int64)
        return self

    def __call__(self, rows: np.ndarray, jobs: np.ndarray, ended: np.ndarray) -> None:
        states = self.states()
        for r, job, end in zip(rows.tolist(), jobs.tolist(), ended.tolist(), strict=True):
            if not end:
                self.last[r] = (job, states[r])
                continue
            seen = self.last.pop(r, None)
            level, v = divmod(job, self.V)
            self.cause[v, level] = self.hazards.classify(seen[1] if seen and seen[0] == job else None)

    def rates(self, complete: np.ndarray, timed_out: np.ndarray) -> dict[str, np.ndarray]:
        """Per variant and level (``(V, L)`` floats, 0 or 1): died of any cause, and of each cause."""
        died = (np.asarray(complete) == 0) & (np.asarray(timed_out) == 0)
        out = {ANY: died.astype(np.float64)}
        for c, cause in enumerate(self.causes):
            out[cause] = (died & (self.cause == c)).astype(np.float64)
        return out
