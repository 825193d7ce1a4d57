"""The sweep's player: a held coordinate that can be released after ``K`` steps or redrawn at every step.

:class:`~proclab.interpret.interventions.edited_agent.HeldAgent` holds one value per row for a whole
episode. Two arms need more (:mod:`proclab.interpret.interventions.arms`): a *brief* edit ``ARM@K``
holds the arm's value for the first ``K`` steps of an episode and then releases it, and
``resample-step`` draws a recorded value at every step. :class:`TimedAgent` plays both without any
change to the batched player: it counts each row's steps in an extra entry of the agent's state
(:data:`COUNTER`, carried, reset and split into pieces like every state tensor), reads a brief edit's
length from the planned coordinate (:func:`planned`: ``m + k (K + 1)`` for coordinate ``m`` of ``k``),
and draws a value from the recorded coordinates wherever the planned value is NaN.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from proclab.errors import ProclabError
from proclab.interpret.interventions.edited_agent import HeldAgent

COUNTER = "sweep.step"
"""State entry holding each row's step in its episode."""


def planned(m: int, k: int, release: int) -> int:
    """The coordinate the player is planned with: ``m``, or ``m + k (K + 1)`` for an edit released after
    ``release = K`` steps (``-1``: never)."""
    return m if m < 0 or release < 0 else m + k * (release + 1)


class TimedAgent(HeldAgent):
    """A :class:`HeldAgent` whose rows may be released after their first ``K`` steps and whose NaN values
    are drawn at every step from ``recorded`` (``(N, k)`` recorded coordinates)."""

    def __init__(self, agent, coords, key: str, recorded: np.ndarray, seed: int):
        super().__init__(agent, coords, key)
        self.recorded = torch.as_tensor(np.asarray(recorded), dtype=torch.float32)
        self.draws = torch.Generator().manual_seed(int(seed))
        self.release: Tensor | None = None
        self.step_of: Tensor | None = None

    def initial_state(self, batch: int, device=None) -> dict[str, Tensor]:
        state = dict(self.agent.initial_state(batch, device=device))
        state[COUNTER] = torch.zeros(batch, dtype=torch.long, device=device)
        return state

    def plan(self, dims: Tensor, values: Tensor) -> TimedAgent:
        k = self.coords.k
        self.release = torch.where(dims >= k, torch.div(dims, k, rounding_mode="floor") - 1, -1)
        return super().plan(torch.where(dims < 0, dims, torch.remainder(dims, k)), values)

    def unroll(
        self, obs: Tensor, state: Mapping[str, Tensor], firsts: Tensor, prev_rewards: Tensor | None = None
    ):
        if obs.shape[0] != 1:
            raise ProclabError("the sweep's player steps one step at a time")
        state = dict(state)
        step = torch.where(firsts[0].bool(), 0, state.pop(COUNTER))
        self.step_of = step
        out, new = super().unroll(obs, state, firsts, prev_rewards)
        return out, {**new, COUNTER: step + 1}

    def edit(self, h: Tensor, prev: Tensor, first: Tensor) -> Tensor:
        n = len(h)
        dims = self.dims.expand(n) if self.dims.dim() == 0 else self.dims
        values = self.values.expand(n) if self.values.dim() == 0 else self.values
        release = self.release.expand(n) if self.release.dim() == 0 else self.release
        if self.step_of is not None:
            step = self.step_of.to(dims.device)
            dims = torch.where((release.to(dims.device) >= 0) & (step >= release.to(dims.device)), -1, dims)
        redraw = torch.isnan(values) & (dims >= 0)
        if bool(redraw.any()):
            rows = torch.randint(0, len(self.recorded), (n,), generator=self.draws)
            drawn = self.recorded[rows, dims.clamp(min=0).cpu()].to(values.device, values.dtype)
            values = torch.where(redraw, drawn, values)
        kept = self.dims, self.values
        self.dims, self.values = dims, values
        try:
            return super().edit(h, prev, first)
        finally:
            self.dims, self.values = kept
