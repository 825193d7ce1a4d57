"""An agent edited per row at one hook point, for playing many variants of an edit in one batch.

:func:`proclab.interpret.interventions.batched_play.play` steps episodes of several variants together
and, before each step, calls ``plan(dims, values)``: row ``r`` plays variant ``dims[r]`` (``-1``: the
plain agent) with parameter ``values[r]``. Here a variant is a :class:`RowEdit` of the activation at
``hook``: :class:`AddVector` adds ``value`` times a steering vector (a coefficient),
:class:`AddLevelVector` each level's own vector at a fixed coefficient, :class:`WriteSites`
writes a magnitude into some channels at one position per row (``value`` is the flat index of the
position in the map, so each level can have its own target).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from proclab.errors import ProclabError
from proclab.interpret.interventions.spec import sample_shapes
from proclab.models.hooks import patch


@dataclass(frozen=True, eq=False)
class AddVector:
    """``act + value * vector`` (``vector`` of the hook's per-sample shape, or one entry per channel)."""

    vector: Tensor

    def __call__(self, rows: Tensor, values: Tensor) -> Tensor:
        v = self.vector.to(device=rows.device, dtype=rows.dtype)
        if v.dim() == 1 and rows.dim() > 2:  # a direction across channels, at every position
            v = v.view(-1, *([1] * (rows.dim() - 2)))
        return rows + values.view(-1, *([1] * (rows.dim() - 1))) * v


@dataclass(frozen=True, eq=False)
class AddLevelVector:
    """``act + coefficient * vectors[value]``: each row's own vector (one per level, its index the row's
    value), at one coefficient (a variant per coefficient)."""

    vectors: Tensor  # (L, *per-sample shape)
    coefficient: float

    def __call__(self, rows: Tensor, values: Tensor) -> Tensor:
        v = self.vectors.to(device=rows.device, dtype=rows.dtype)[values.long()]
        return rows + self.coefficient * v


@dataclass(frozen=True, eq=False)
class WriteSites:
    """Channels ``channels`` of a conv map set to ``magnitudes`` at the position whose flat index
    (``y * W + x``) is each row's value; everything else is kept."""

    channels: tuple[int, ...]
    magnitudes: tuple[float, ...]

    def __call__(self, rows: Tensor, values: Tensor) -> Tensor:
        if rows.dim() != 4:
            raise ProclabError("writing a position needs a conv map (C, H, W)")
        site = values.long()
        w = rows.shape[-1]
        out = rows.clone()
        n = torch.arange(len(rows), device=rows.device)
        for c, m in zip(self.channels, self.magnitudes, strict=True):
            out[n, c, site // w, site % w] = m
        return out


class RowEditedAgent:
    """``agent`` whose activation at ``hook`` row ``r`` gets ``variants[dims[r]]`` with ``values[r]``."""

    def __init__(self, agent, hook: str, variants: Sequence):
        self.agent, self.hook, self.variants = agent, hook, list(variants)
        self.shape = sample_shapes(agent)[hook]
        self.dims: Tensor | None = None
        self.values: Tensor | None = None

    def __getattr__(self, name: str):
        if name == "agent":
            raise AttributeError(name)
        return getattr(self.agent, name)

    def plan(self, dims: Tensor, values: Tensor) -> RowEditedAgent:
        if int(dims.max()) >= len(self.variants):
            raise ProclabError(f"variant {int(dims.max())} is outside 0-{len(self.variants) - 1}")
        self.dims, self.values = dims, values
        return self

    def _edit(self, act: Tensor) -> Tensor:
        rows = act.reshape(-1, *self.shape)
        n = len(rows)
        dims = self.dims.to(rows.device).expand(n) if self.dims.dim() == 0 else self.dims.to(rows.device)
        values = self.values.to(rows.device, rows.dtype)
        values = values.expand(n) if values.dim() == 0 else values
        out = rows
        for v, edit in enumerate(self.variants):
            sel = dims == v
            if bool(sel.any()):
                out = out.clone() if out is rows else out
                out[sel] = edit(rows[sel], values[sel])
        return out.reshape(act.shape)

    def step(self, obs, state, first, prev_reward=None):
        if self.dims is None:
            raise RuntimeError("RowEditedAgent.plan(dims, values) must be called before stepping")
        with patch(self.agent, self.hook, self._edit):
            return self.agent.step(obs, state, first, prev_reward)
