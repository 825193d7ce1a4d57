"""The sweep's player: a held coordinate that can be released after ``K`` steps or redrawn at every step,
or two coordinates swapped.

:class:`~proclab.interpret.interventions.edited_agent.HeldAgent` holds one value per row for a whole
episode. Two arms need more (:mod:`proclab.interpret.interventions.arms`): a *brief* edit ``ARM@K``
holds the arm's value for the first ``K`` steps of an episode and then releases it, and
``resample-step`` draws a recorded value at every step. :class:`TimedAgent` plays both without any
change to the batched player: it counts each row's steps in an extra entry of the agent's state
(:data:`COUNTER`, carried, reset and split into pieces like every state tensor), reads a brief edit's
length from the planned coordinate (:func:`planned`: ``m + k (K + 1)`` for coordinate ``m`` of ``k``),
and draws a value from the recorded coordinates wherever the planned value is NaN. A *swap* of
coordinates ``I`` and ``J`` (``--swaps``, :func:`~proclab.interpret.bases.coordinates.swap`, which says
why the state and not its increments is swapped) is planned as the negative code :func:`swap_code`
(``-1`` stays the plain agent), so a sweep plays swaps beside its holds in the same batches.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from proclab.errors import ProclabError
from proclab.interpret.bases.coordinates import swap
from proclab.interpret.interventions.edited_agent import HeldAgent

COUNTER = "sweep.step"
"""State entry holding each row's step in its episode."""


def planned(m: int, k: int, release: int) -> int:
    """The coordinate the player is planned with: ``m``, or ``m + k (K + 1)`` for an edit released after
    ``release = K`` steps (``-1``: never)."""
    return m if m < 0 or release < 0 else m + k * (release + 1)


def swap_code(i: int, j: int, k: int) -> int:
    """The coordinate the player is planned with for a swap of coordinates ``i`` and ``j`` of ``k``."""
    return -2 - (i * k + j)


def _rows(x: Tensor, n: int) -> Tensor:
    return x.expand(n) if x.dim() == 0 else x


class TimedAgent(HeldAgent):
    """A :class:`HeldAgent` whose rows may be released after their first ``K`` steps, whose NaN values
    are drawn at every step from ``recorded`` (``(N, k)`` recorded coordinates), and whose rows planned
    with a :func:`swap_code` swap two coordinates instead of holding one."""

    def __init__(self, agent, coords, key: str, recorded: np.ndarray, seed: int):
        super().__init__(agent, coords, key)
        self.recorded = torch.as_tensor(np.asarray(recorded), dtype=torch.float32)
        self.draws = torch.Generator().manual_seed(int(seed))
        self.release: Tensor | None = None
        self.step_of: Tensor | None = None
        self.codes: Tensor | None = None
        self.pair: tuple[Tensor, Tensor] | None = None

    def initial_state(self, batch: int, device=None) -> dict[str, Tensor]:
        state = dict(self.agent.initial_state(batch, device=device))
        state[COUNTER] = torch.zeros(batch, dtype=torch.long, device=device)
        return state

    def plan(self, dims: Tensor, values: Tensor) -> TimedAgent:
        k = self.coords.k
        self.codes = dims
        self.release = torch.where(dims >= k, torch.div(dims, k, rounding_mode="floor") - 1, -1)
        swapped = dims <= -2
        code = torch.where(swapped, -2 - dims, 0)
        first = torch.where(swapped, torch.div(code, k, rounding_mode="floor"), -1)
        self.pair = (first, torch.where(swapped, torch.remainder(code, k), -1))
        return super().plan(torch.where(dims < 0, -1, torch.remainder(dims, k)), values)

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
        dims, values, release = (_rows(x, n) for x in (self.dims, self.values, self.release))
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
            out = super().edit(h, prev, first)
        finally:
            self.dims, self.values = kept
        a, b = (_rows(p.to(h.device), n) for p in self.pair)
        return swap(self.coords, out, a, b) if bool((a >= 0).any()) else out
