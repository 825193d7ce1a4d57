"""Gated recurrent cores: ``gru`` (interpreting-rl-behavior) and ``lstm`` (modern-srwm baseline).

Written out rather than wrapping ``nn.GRU``/``nn.LSTM`` because the state must be reset per row
at episode starts *inside* a sequence, and every step's state must pass a hook point. The input
projection ``W_ih x + b_ih`` is computed for all ``T*B`` rows at once; only ``W_hh h`` is in the
time loop. Parameter names, shapes, gate order and default init equal ``nn.GRUCell`` /
``nn.LSTMCell`` (gates ``r, z, n`` and ``i, f, g, o``), so their weights load directly.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from proclab.models.cores.base import Core, MemoryLayer, State, scan
from proclab.models.cores.registry import register_core
from proclab.models.hooks import HookPoint

if TYPE_CHECKING:
    from proclab.models.config import AgentConfig


class _GatedLayer(MemoryLayer):
    gates = 1
    state_names: tuple[str, ...] = ("h",)

    def __init__(self, in_dim: int, size: int):
        super().__init__()
        self.size = size
        self.weight_ih = nn.Parameter(torch.empty(self.gates * size, in_dim))
        self.weight_hh = nn.Parameter(torch.empty(self.gates * size, size))
        self.bias_ih = nn.Parameter(torch.empty(self.gates * size))
        self.bias_hh = nn.Parameter(torch.empty(self.gates * size))
        bound = 1 / math.sqrt(size)  # PyTorch's RNN default
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)
        self.state_shapes = {name: (size,) for name in self.state_names}
        self.add_state_hooks()
        self.hook_out = HookPoint()  # the hidden state sequence (T, B, size)

    def cell(self, inputs: tuple[Tensor, ...], state: State) -> tuple[None, State]:
        raise NotImplementedError

    def forward(self, x: Tensor, state: State, firsts: Tensor, detach: bool) -> tuple[Tensor, State]:
        gi = F.linear(x, self.weight_ih, self.bias_ih)
        out, state = scan(self.cell, (gi,), state, firsts, detach, self.state_hooks(), output="h")
        return self.hook_out(out), state


class GRULayer(_GatedLayer):
    """h' = (1 - z) * n + z * h, n = tanh(W_in x + b_in + r * (W_hn h + b_hn))."""

    gates = 3

    def cell(self, inputs: tuple[Tensor, ...], state: State) -> tuple[None, State]:
        (gi,) = inputs
        h = state["h"]
        gh = F.linear(h, self.weight_hh, self.bias_hh)
        i_r, i_z, i_n = gi.chunk(3, -1)
        h_r, h_z, h_n = gh.chunk(3, -1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return None, {"h": (1 - z) * n + z * h}


class LSTMLayer(_GatedLayer):
    """c' = f * c + i * g, h' = o * tanh(c') with gates i, f, g, o."""

    gates = 4
    state_names = ("h", "c")

    def cell(self, inputs: tuple[Tensor, ...], state: State) -> tuple[None, State]:
        (gi,) = inputs
        gates = gi + F.linear(state["h"], self.weight_hh, self.bias_hh)
        i, f, g, o = gates.chunk(4, -1)
        c = torch.sigmoid(f) * state["c"] + torch.sigmoid(i) * torch.tanh(g)
        return None, {"h": torch.sigmoid(o) * torch.tanh(c), "c": c}


def _stack(layer: type[_GatedLayer], config: AgentConfig, in_dim: int) -> Core:
    dims = [in_dim] + [config.rnn_size] * config.rnn_layers
    layers = [layer(dims[i], dims[i + 1]) for i in range(config.rnn_layers)]
    return Core(in_dim, layers, out_dim=config.rnn_size)


@register_core("gru")
def build_gru(config: AgentConfig, in_dim: int) -> Core:
    return _stack(GRULayer, config, in_dim)


@register_core("lstm")
def build_lstm(config: AgentConfig, in_dim: int) -> Core:
    return _stack(LSTMLayer, config, in_dim)
