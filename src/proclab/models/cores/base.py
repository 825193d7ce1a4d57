"""What every core shares: the time loop, state resets, detaching, and the layer stack.

A core maps time-major features ``(T, B, D_in)`` and a state dict to outputs ``(T, B, D_out)``
and the new state. Work that does not depend on the carried state (input projections, layer
norms, feed-forward sub-layers, output projections) runs on all ``T*B`` rows at once; only the
state recurrence is a Python loop over time (:func:`scan`), vectorised over batch and heads.

Inside the loop, before step ``t`` uses the state:

1. rows with ``firsts[t]`` are reset to the initial state (zeros for every core);
2. with ``detach`` (the published modern-srwm semantics) the state is cut from the graph;
3. after the update, each state tensor passes through its per-step hook point, so a patch
   changes what is carried to the next step.

The recurrence runs in float32 even under bf16 autocast: fast weights accumulate rank-one
updates over hundreds of steps, which bf16's 8-bit mantissa does not survive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import nullcontext

import torch
from torch import Tensor, nn

from proclab.models.hooks import HookPoint

State = dict[str, Tensor]
Cell = Callable[[tuple[Tensor, ...], State], tuple[Tensor | None, State]]


def full_precision(x: Tensor) -> Tensor:
    """``x`` as float32 if it is a half type (bf16/fp16 under autocast); other dtypes unchanged."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def reset_rows(state: Mapping[str, Tensor], keep: Tensor) -> State:
    """Multiply every (batch-first) state tensor by ``keep`` ``(B,)``: 0 resets a row, 1 keeps it."""
    return {k: v * keep.to(v.dtype).view(-1, *([1] * (v.dim() - 1))) for k, v in state.items()}


def _no_autocast(device_type: str):
    try:
        enabled = torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4: no device argument
        enabled = torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()
    return torch.autocast(device_type, enabled=False) if enabled else nullcontext()


def scan(
    cell: Cell,
    inputs: tuple[Tensor, ...],
    state: Mapping[str, Tensor],
    firsts: Tensor,
    detach: bool,
    hooks: Mapping[str, HookPoint],
    output: str | None = None,
) -> tuple[Tensor, State]:
    """Run ``cell`` over time: ``inputs`` are ``(T, B, ...)``, ``firsts`` ``(T, B)`` bool.

    ``cell(inputs_t, state) -> (out_t, new_state)``. With ``output`` set, ``out_t`` is instead
    the (hooked) new state tensor of that name, as for an RNN whose output is its hidden state.
    Returns the outputs stacked to ``(T, B, ...)`` and the final state.
    """
    inputs = tuple(full_precision(x) for x in inputs)
    keeps = (~firsts).float()  # once for all steps
    state = dict(state)
    outs = []
    with _no_autocast(firsts.device.type):
        for t in range(firsts.shape[0]):
            state = reset_rows(state, keeps[t])
            if detach:
                state = {k: v.detach() for k, v in state.items()}
            out, state = cell(tuple(x[t] for x in inputs), state)
            state = {k: hooks[k](v) for k, v in state.items()}
            outs.append(state[output] if output is not None else out)
    return torch.stack(outs), state


class MemoryLayer(nn.Module):
    """One layer of a core. Subclasses set ``state_shapes`` (per-row shapes) and ``forward``."""

    def __init__(self):
        super().__init__()
        self.state_shapes: dict[str, tuple[int, ...]] = {}

    def add_state_hooks(self) -> None:
        """A per-step hook point ``hook_<name>`` for each state tensor."""
        for name in self.state_shapes:
            self.add_module(f"hook_{name}", HookPoint(layout="step"))

    def state_hooks(self) -> dict[str, HookPoint]:
        return {name: getattr(self, f"hook_{name}") for name in self.state_shapes}

    def forward(self, x: Tensor, state: State, firsts: Tensor, detach: bool) -> tuple[Tensor, State]:
        raise NotImplementedError


class FeedForward(nn.Module):
    """``x + W2 relu(W1 LN(x))``: the transformer-style cores' feed-forward sub-layer (dropout 0)."""

    def __init__(self, dim: int, inner: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, inner)
        self.relu = nn.ReLU()
        self.hook_hidden = HookPoint()
        self.fc2 = nn.Linear(inner, dim)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.fc2(self.hook_hidden(self.relu(self.fc1(self.norm(x)))))


class TransformerLayer(MemoryLayer):
    """A memory sub-layer with a residual connection, then a :class:`FeedForward` sub-layer.

    Subclasses build their memory modules and set ``state_shapes``, then call
    :meth:`finish_layer` (which adds the state hooks, ``hook_read``, ``hook_mem``, the
    feed-forward sub-layer and ``hook_out``, so that hook points are listed in forward order),
    and implement :meth:`memory`, which returns the residual increment ``(T, B, D)`` and the
    new state.
    """

    def finish_layer(self, dim: int, inner: int) -> None:
        self.add_state_hooks()
        self.hook_read = HookPoint()  # what the output projection reads, per head (T, B, H, d)
        self.hook_mem = HookPoint()  # x + memory(x)
        self.ff = FeedForward(dim, inner)
        self.hook_out = HookPoint()

    def memory(self, x: Tensor, state: State, firsts: Tensor, detach: bool) -> tuple[Tensor, State]:
        raise NotImplementedError

    def forward(self, x: Tensor, state: State, firsts: Tensor, detach: bool) -> tuple[Tensor, State]:
        m, state = self.memory(x, state, firsts, detach)
        x = self.hook_mem(x + m)
        return self.hook_out(self.ff(x)), state


class Core(nn.Module):
    """Optional input projection, then layers ``0, 1, ...`` (module names), then ``hook_out``.

    State keys are ``"<layer>.<name>"`` (e.g. ``"0.F"``); the agent prefixes them with ``core.``.
    """

    def __init__(self, in_dim: int, layers: list[MemoryLayer], out_dim: int, project_to: int | None = None):
        super().__init__()
        if project_to is not None:
            self.input_proj = nn.Linear(in_dim, project_to)
            self.hook_in = HookPoint()
        self.num_layers = len(layers)
        for i, layer in enumerate(layers):
            self.add_module(str(i), layer)
        self.hook_out = HookPoint()
        self.out_dim = out_dim

    def layers(self) -> list[MemoryLayer]:
        return [self.get_submodule(str(i)) for i in range(self.num_layers)]

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return {f"{i}.{k}": s for i, layer in enumerate(self.layers()) for k, s in layer.state_shapes.items()}

    def initial_state(self, batch: int, device=None) -> State:
        return {k: torch.zeros(batch, *s, device=device) for k, s in self.state_shapes().items()}

    def forward(
        self, x: Tensor, state: Mapping[str, Tensor], firsts: Tensor, detach: bool
    ) -> tuple[Tensor, State]:
        if hasattr(self, "input_proj"):
            x = self.hook_in(self.input_proj(x))
        new: State = {}
        for i, layer in enumerate(self.layers()):
            sub = {k: state[f"{i}.{k}"] for k in layer.state_shapes}
            x, sub = layer(x, sub, firsts, detach)
            new.update({f"{i}.{k}": v for k, v in sub.items()})
        return self.hook_out(x), new
