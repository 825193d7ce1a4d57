"""Both goals of every (variant, level) episode of batched paired play.

Goal misgeneralization asks whether an edit of the agent changes *which* goal it reaches, not only whether
it completes the level: CoinRun's coin and the level's end, Maze's cheese and the maze's top-right corner
(:mod:`proclab.envs.state.goals`, where both are defined). :class:`GoalWatch` is a ``watch`` of
:func:`~proclab.interpret.interventions.batched_play.play` that computes them as
:class:`~proclab.envs.state.GoalTracker` does for a vector env, but per episode of the batched player, whose
slots start any (variant, level) at any step: each level's goal plan comes from its first state (the one
every variant of it loads), and the second goal is read from the agent's box in the state after every step
whose episode goes on (a slot that just ended already shows the next level, so the last step is not seen;
:meth:`~proclab.envs.state.goals.GoalPlan.outcome` counts a completion on the second goal's cell).

Reading every slot's state after every step costs about as much as the step (CoinRun: 72 us a slot
against 35), so the steering and the sweep compute goals only where they are asked for (a game with
goals; the sweep's ``goals`` option); an episode that already reached the second goal is not read again.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from proclab.envs.state import goal_names, parse_state
from proclab.envs.state.goals import GoalPlan, plan_goals
from proclab.envs.state.model import PLAYER
from proclab.envs.state.scan import scan
from proclab.errors import ProclabError


class GoalWatch:
    """``watch`` of batched play: ``reached[v, l]`` (variant ``v`` on level index ``l`` came to the second
    goal at some step seen); :meth:`outcomes` gives both goals per episode. ``states()`` returns every slot's
    game state bytes, ``level_state(level)`` a level's first state (``levels[l]`` is what it takes)."""

    def __init__(self, states: Callable[[], list[bytes]], level_state: Callable[[int], bytes], game: str):
        self.names = goal_names(game)
        if not self.names:
            raise ProclabError(f"{game} has no pair of goals (only coinrun and maze have one)")
        self.states, self.level_state = states, level_state
        self.start(0, np.zeros(0, np.int64))

    @classmethod
    def of(cls, env) -> GoalWatch:
        """The watcher of a :class:`~proclab.interpret.interventions.batched_play.ProcgenLevels` env (refused in
        one line for a game without two goals)."""
        return cls(env.env.slot_states, env.level_state, env.config.games()[0])

    def start(self, variants: int, levels: np.ndarray) -> GoalWatch:
        """Forget what was seen; the next play has ``variants`` x ``levels`` episodes."""
        self.V, self.levels = variants, np.asarray(levels)
        self.reached = np.zeros((variants, len(self.levels)), bool)
        self.plans: dict[int, GoalPlan] = {}
        return self

    def _plan(self, lv: int) -> GoalPlan:
        """Level index ``lv``'s plan; the first time, its first state is looked at too (every variant starts
        there)."""
        if lv not in self.plans:
            first = parse_state(self.level_state(int(self.levels[lv])))
            plan = plan_goals(first)
            assert plan is not None  # a game with goals
            self.plans[lv] = plan
            a = first.agent
            self.reached[:, lv] |= plan.reached_by(a.x, a.y, a.rx, a.ry)
        return self.plans[lv]

    def __call__(self, rows: np.ndarray, jobs: np.ndarray, ended: np.ndarray, actions: np.ndarray) -> None:
        states = None
        for r, job in zip(rows[~ended].tolist(), jobs[~ended].tolist(), strict=True):
            lv, v = divmod(int(job), self.V)
            plan = self._plan(lv)
            if self.reached[v, lv]:
                continue
            states = self.states() if states is None else states
            _, entities, _ = scan(states[r])
            me = entities[np.flatnonzero(entities["type"] == PLAYER)[0]]
            self.reached[v, lv] = plan.reached_by(me["x"], me["y"], me["rx"], me["ry"])

    def outcomes(self, complete: np.ndarray) -> np.ndarray:
        """``bool (2, V, L)``: per goal (:attr:`names`: the level's own, then the second), whether each
        episode reached it; ``complete`` ``(V, L)`` is the play's level completion."""
        complete = np.asarray(complete) > 0
        on = np.array([self._plan(lv).on_completion for lv in range(len(self.levels))], bool)
        return np.stack([complete, self.reached | (complete & on[None])])
