r"""Steering variants played side by side: each row of a batch gets its own edit at one hook point.

:func:`proclab.interpret.interventions.batched_play.play` steps episodes of several variants together
and, before each forward pass, asks a plan for the interventions of its rows: row ``r`` plays variant
``codes[r]`` (``-1``: the plain agent) with parameter ``values[r]``. :func:`variants_plan` makes that
plan from a list of variants, each a function from (hook, the rows that play it, their values) to one
:class:`~proclab.models.interventions.Intervention`\ : :class:`AddLevelVector` adds a row's own vector
(one per level, the value its index; a vector shared by all levels is the same vector at every index)
at a fixed coefficient, :class:`WriteSites` writes a magnitude into some channels at one position per
row (``value`` is the flat index of the position in the map, so each level can have its own target).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from proclab.errors import ProclabError
from proclab.models.interventions import Intervention, Mask

Variant = Callable[[str, Tensor, Tensor, tuple[int, ...]], Intervention]


def variants_plan(hook: str, shape: tuple[int, ...], variants: Sequence[Variant]):
    """The plan that gives the rows of variant ``v`` its intervention at ``hook`` (per-sample ``shape``)."""

    def plan(codes: Tensor, values: Tensor) -> list[Intervention]:
        if int(codes.max()) >= len(variants):
            raise ProclabError(f"variant {int(codes.max())} is outside 0-{len(variants) - 1}")
        out = []
        for v, variant in enumerate(variants):
            rows = codes == v
            if bool(rows.any()):
                out.append(variant(hook, rows, values, shape))
        return out

    return plan


@dataclass(frozen=True, eq=False)
class AddLevelVector:
    """``act + coefficient * vectors[value]``: each row's own vector (one per level, its index the row's
    value), at one coefficient (a variant per coefficient)."""

    vectors: Tensor  # (L, *per-sample shape)
    coefficient: float

    def __call__(self, hook: str, rows: Tensor, values: Tensor, shape) -> Intervention:
        v = self.vectors.to(values.device)[values.long()]
        return Intervention(hook, "all", "add", self.coefficient * v, per_row=True, rows=rows)


@dataclass(frozen=True, eq=False)
class WriteSites:
    """Channels ``channels`` of a conv map set to ``magnitudes`` at the position whose flat index
    (``y * W + x``) is each row's value; everything else is kept."""

    channels: tuple[int, ...]
    magnitudes: tuple[float, ...]

    def __call__(self, hook: str, rows: Tensor, values: Tensor, shape) -> Intervention:
        if len(shape) != 3:
            raise ProclabError("writing a position needs a conv map (C, H, W)")
        n, w = len(values), shape[-1]
        site = values.long()
        mask = torch.zeros((n, *shape), dtype=torch.bool, device=values.device)
        target = torch.zeros((n, *shape), device=values.device)
        r = torch.arange(n, device=values.device)
        for c, m in zip(self.channels, self.magnitudes, strict=True):
            mask[r, c, site // w, site % w] = True
            target[r, c, site // w, site % w] = m
        return Intervention(hook, Mask(mask), "set", target, per_row=True, rows=rows)
