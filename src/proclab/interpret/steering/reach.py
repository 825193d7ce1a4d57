"""Whether the agent went somewhere: per (variant, level), did its centre come within ``radius`` world
units (half a cell by default) of the level's target point at any step.

Called by :func:`~proclab.interpret.interventions.batched_play.play` after every env step (its
``watch``); the agent's position is read from each slot's game state with the recorder's cheap scan
(:func:`proclab.record.ground_truth.scan`), not a full parse. A slot whose episode ended on the step
already shows the next level; it is skipped.
"""

from __future__ import annotations

import numpy as np

from proclab.envs.state.model import PLAYER
from proclab.record.ground_truth import scan


class Reach:
    """``hit[v, l]``: variant ``v`` reached level ``l``'s target; ``states()`` gives every slot's bytes."""

    def __init__(self, states, targets: np.ndarray, variants: int, radius: float = 0.5):
        self.states, self.targets, self.V, self.radius = states, np.asarray(targets), variants, radius
        self.hit = np.zeros((variants, len(self.targets)), bool)

    def __call__(self, rows: np.ndarray, jobs: np.ndarray, ended: np.ndarray) -> None:
        states = self.states()
        for r, job in zip(rows[~ended], jobs[~ended], strict=True):
            level, v = divmod(int(job), self.V)
            _, entities, _ = scan(states[r])
            agent = entities[entities["type"] == PLAYER]
            if len(agent) and np.all(
                np.abs([agent["x"][0], agent["y"][0]] - self.targets[level]) <= self.radius
            ):
                self.hit[v, level] = True
