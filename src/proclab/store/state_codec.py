"""The agent's state in the simulator's loop as one flat vector.

The simulator carries the agent's state as one ``(B, D)`` vector, laid out as the episode store
lays out ``state_in``/``state_out`` (per core layer, the layer's tensors raveled in order; see
:mod:`proclab.store.schema`), so labels come straight from the store, any core works, and the
vector each step consumes is one tensor that gradients can be taken with respect to.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from proclab.store.schema import STATE_IN, STATE_OUT, layer_width, state_layout


class StateCodec:
    """An agent's state dict <-> one flat ``(..., D)`` vector in the episode store's layout."""

    def __init__(self, shapes: Mapping[str, tuple[int, ...]]):
        self.layout = state_layout(shapes)
        self.parts = [(key, shape) for parts in self.layout.values() for key, shape in parts]
        self.sizes = [int(torch.Size(shape).numel()) for _, shape in self.parts]
        self.width = sum(self.sizes)

    def layer_slices(self) -> dict[str, slice]:
        """Each core layer's slice of the flat vector (its ``state_*/<layer>`` store field), in order."""
        out, start = {}, 0
        for layer, parts in self.layout.items():
            out[layer] = slice(start, start + layer_width(parts))
            start = out[layer].stop
        return out

    def store_fields(self, prefix: str) -> list[str]:
        """``state_in/<layer>`` or ``state_out/<layer>`` names of the store fields, in order."""
        assert prefix in (STATE_IN, STATE_OUT)
        return [prefix + layer for layer in self.layout]

    def flatten(self, state: Mapping[str, Tensor]) -> Tensor:
        """Batch-first state tensors (extra leading dims allowed) -> ``(..., D)``."""
        if not self.parts:
            raise ValueError("a stateless agent has no state to flatten")
        key, shape = self.parts[0]
        lead = state[key].shape[: state[key].dim() - len(shape)]
        return torch.cat([state[k].reshape(*lead, -1) for k, _ in self.parts], -1)

    def unflatten(self, flat: Tensor) -> dict[str, Tensor]:
        """``(..., D)`` -> state tensors ``(..., *shape)`` (views of ``flat``)."""
        pieces = flat.split(self.sizes, -1) if self.parts else []
        return {
            k: p.reshape(*flat.shape[:-1], *shape) for (k, shape), p in zip(self.parts, pieces, strict=True)
        }

    def hook_names(self) -> dict[str, str]:
        """State key -> the per-step hook point its value leaving each step passes (``core.0.hook_h``)."""
        names = {}
        for key, _ in self.parts:
            prefix, name = key.rsplit(".", 1)
            names[key] = f"{prefix}.hook_{name}"
        return names
