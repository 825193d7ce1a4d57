"""The sweep's variants as interventions: each row of a batch holds, redraws or swaps coordinates.

The batched player (:func:`proclab.interpret.interventions.batched_play.play`) gives each row of a
forward pass a *planned code* and a value, and asks a plan for the interventions that play them
(:class:`SweepPlan`). A code is a coordinate ``m >= 0`` held at the row's value (a hold,
:mod:`proclab.interpret.interventions.arms`); ``m + k (K + 1)`` for an edit released after its
first ``K`` steps (a *brief* edit ``ARM@K``, :func:`planned`: the row's episode step, counted by the
agent wrapper, ends it); a value of NaN draws the coordinate from the recorded ones at every step
(``resample-step``); a code ``<= -2`` swaps two coordinates (:func:`swap_code`); ``-1`` is the plain
agent. One plan call makes at most three interventions, each over the rows it concerns: the holds,
the redraws, the swaps.

**Swaps exchange the state, not its increments.** ``analyze intervene --exchange I:J`` exchanges the
coordinates of each step's *increment* ``h_t - h_{t-1}``: the state then adds J's changes along I from
the start state's coordinates on, so coordinate I ends near ``c_I(h_0) + c_J(h_t) - c_J(h_0)``, as far off
the data as the all-zero start state puts the two coordinates apart (the reason the sweep's collapse arm
left the data for 15 of the seed agent's 16 ICs). "Swapping a buzzsaw direction with a box direction"
says that what the agent reads along one direction is what it computed along the other, so a swap
exchanges the coordinates of the state itself: ``c'_I = c_J(h)``, ``c'_J = c_I(h)``, values each
coordinate takes in the other's recorded states. Held at every step at the core's per-step hook, the
swapped state is what the heads read *and* what the next step starts from: what the core recomputes from
each frame is fully exchanged, while what it carries unchanged along I and J comes back exchanged at the
next step and is exchanged again (the swap is its own inverse). A swap's effect is that of both, and is
read with this in mind.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from proclab.interpret.interventions.direction_edits import edit_hook
from proclab.models.interventions import Coordinates, Intervention


def planned(m: int, k: int, release: int) -> int:
    """The code a row is planned with: coordinate ``m``, or ``m + k (K + 1)`` for an edit released after
    ``release = K`` steps (``-1``: never)."""
    return m if m < 0 or release < 0 else m + k * (release + 1)


def swap_code(i: int, j: int, k: int) -> int:
    """The code a row is planned with for a swap of coordinates ``i`` and ``j`` of ``k``."""
    return -2 - (i * k + j)


class SweepPlan:
    """Rows' codes and values -> the interventions at the hook point of ``key`` (a state tensor or
    ``hook:NAME``) in ``coords``; ``recorded`` (``(N, k)``) are the coordinates redraws come from."""

    def __init__(self, coords, key: str, recorded: np.ndarray):
        self.coords, self.hook = coords, edit_hook(key)
        self.recorded = torch.as_tensor(np.asarray(recorded), dtype=torch.float32)

    def __call__(self, codes: Tensor, values: Tensor) -> list[Intervention]:
        k = self.coords.k
        held = codes >= 0
        coordinate = torch.where(held, torch.remainder(codes, k), -1)
        release = torch.where(codes >= k, torch.div(codes, k, rounding_mode="floor") - 1, -1)
        redraw = held & torch.isnan(values)
        kept = held & ~redraw
        steps = (0, release) if bool((release >= 0).any()) else None
        out = []
        if bool(kept.any()):
            select = Coordinates(self.coords, torch.where(kept, coordinate, -1))
            out.append(Intervention(self.hook, select, "set", values, per_row=True, steps=steps))
        if bool(redraw.any()):
            select = Coordinates(self.coords, torch.where(redraw, coordinate, -1))
            out.append(
                Intervention(self.hook, select, "resample", source=self.recorded, per_row=True, steps=steps)
            )
        swapped = codes <= -2
        if bool(swapped.any()):
            code = torch.where(swapped, -2 - codes, 0)
            first = torch.where(swapped, torch.div(code, k, rounding_mode="floor"), -1)
            second = torch.where(swapped, torch.remainder(code, k), -1)
            out.append(Intervention(self.hook, Coordinates(self.coords, first, second), "swap", per_row=True))
        return out
