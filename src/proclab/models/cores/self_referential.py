"""Self-referential weight matrices (Irie et al. 2022): ``srwm``, ``sr_delta``, ``no_carry_sr``, ``fake_sr``.

Per layer and head ``h`` (row-vector convention, W stored ``d_in x d_out``; spec §2.3), with the
four sub-matrices ``W = [W_y | W_q | W_k | w_b]`` (``w_b`` has 4 columns, one per sub-matrix):

    x_t = softmax(h_t)                          over the head's d dims; no LayerNorm
    y_t = x_t W^y_{t-1}                         (read with the *pre-update* weights)
    q_t = softmax(x_t W^q_{t-1}),  k_t = softmax(x_t W^k_{t-1}),  beta_t = sigmoid(x_t w^b_{t-1})
    W^Z_t = W^Z_{t-1} + k_t^T beta_{t,Z} (q_t W^Z_{t-1} - k_t W^Z_{t-1})   for Z in y, q, k, b
    out = h + W_o concat_h(y_t),  then the feed-forward sub-layer

The base matrices are parameters initialised N(0, 1/d); the carried state is the *shift*
``W_t - W_base`` (zeros initially), so a reset returns a row to the base weights. With
``detach`` (the published semantics) the shift is cut from the graph every step: ``y_t`` then
depends on W_q, W_k, w_b only through the detached shift, so those three get **no gradient**.

* ``sr_delta`` (``SMFWPlayer``): ``W_y`` has ``3d + 1`` columns and emits ``[q_f, k_f, v_f, b_f]``;
  ``q_f, k_f`` go through softmax, ``beta_f = sigmoid(b_f)``, and a delta-rule fast weight
  ``F`` (``d x d``) is updated and read as in Delta Net: ``out = h + W_o concat_h(q_f F_t)``. The
  published code calls an undefined ``fast_weight_memory`` here (NameError); as the spec says,
  the delta-rule function with that signature was meant, and is what this uses.
* ``no_carry_sr``: the SRWM read with the base weights at every step (the published loop resets
  every step), i.e. ``y_t = softmax(h_t) W^y_base``: feed-forward, no state. W_q, W_k, w_b are
  kept so the parameter count matches the original; they stay in the graph but their gradient
  is always exactly zero.
* ``fake_sr`` (``PseudoSRlayer``): ``out = h + W_o concat_h(h_h W^y_h)`` with a static ``d x d``
  matrix per head, no softmax, no state. ``W^y`` is initialised like the SRWM's base matrices.

**Dropped LayerNorms.** The original SR, Fake-SR, no-carry-SR and SR-Delta layers each construct
a ``LayerNorm(hidden)`` they never apply (its 2 * hidden parameters never get gradient); these
layers do not create it, so each of those cores has ``2 * num_layers * hidden`` (512 under the
modern-srwm dims) fewer parameters than the spec's table. Delta Net's LayerNorm *is* applied
and kept. The feed-forward sub-layers' LayerNorms are applied and kept.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from proclab.models.cores.base import Core, State, TransformerLayer, full_precision, scan
from proclab.models.cores.fast_weight import delta_rule
from proclab.models.cores.registry import register_core
from proclab.models.hooks import HookPoint

if TYPE_CHECKING:
    from proclab.models.config import AgentConfig

SUBMATRICES = ("W_y", "W_q", "W_k", "w_b")


def self_referential_update(
    x: Tensor, weights: Tensor, sizes: list[int], group: Tensor
) -> tuple[Tensor, Tensor]:
    """One SRWM step for all rows and heads.

    ``x`` ``(B, H, d)`` (already softmaxed); ``weights`` ``(B, H, d, N)``, the current
    ``[W_y | W_q | W_k | w_b]`` whose column counts are ``sizes``; ``group[j]`` is the index
    (0..3) of the sub-matrix that column ``j`` belongs to. Returns ``y`` ``(B, H, sizes[0])``
    and the increment ``(B, H, d, N)`` to add to the weights.
    """
    y, q, k, b = torch.einsum("bhi,bhij->bhj", x, weights).split(sizes, dim=-1)
    q, k, beta = q.softmax(-1), k.softmax(-1), torch.sigmoid(b)
    diff = torch.einsum("bhi,bhij->bhj", q - k, weights)  # q W^Z - k W^Z for every Z at once
    return y, torch.einsum("bhi,bhj->bhij", k, beta.index_select(-1, group) * diff)


class _SelfReferentialLayer(TransformerLayer):
    """Base matrices ``W_y`` (``H x d x y_dim``), ``W_q``, ``W_k`` (``H x d x d``), ``w_b`` (``H x d x 4``)."""

    def __init__(self, hidden: int, heads: int, head_dim: int, ff: int, y_dim: int, stateful: bool):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.sizes = [y_dim, head_dim, head_dim, 4]
        for name, cols in zip(SUBMATRICES, self.sizes, strict=True):
            param = nn.Parameter(torch.empty(heads, head_dim, cols))
            nn.init.normal_(param, std=1 / math.sqrt(head_dim))
            self.register_parameter(name, param)
        group = torch.repeat_interleave(torch.arange(4), torch.tensor(self.sizes))
        self.register_buffer("group", group, persistent=False)
        if stateful:
            self.state_shapes = {
                n: (heads, head_dim, c) for n, c in zip(SUBMATRICES, self.sizes, strict=True)
            }
        self.hook_x = HookPoint()  # softmax(h) per head, (T, B, H, d)
        self.out_proj = nn.Linear(heads * head_dim, hidden, bias=False)

    def base_weights(self) -> Tensor:
        return torch.cat([getattr(self, n) for n in SUBMATRICES], dim=-1)

    def split_heads(self, x: Tensor) -> Tensor:
        return x.view(*x.shape[:-1], self.heads, self.head_dim)

    def srwm_cell(self, base: Tensor, x: Tensor, state: State) -> tuple[Tensor, State]:
        shift = torch.cat([state[n] for n in SUBMATRICES], dim=-1)
        y, inc = self_referential_update(x, base + shift, self.sizes, self.group)
        return y, dict(zip(SUBMATRICES, (shift + inc).split(self.sizes, dim=-1), strict=True))


class SRWMLayer(_SelfReferentialLayer):
    """Self-referential weight matrix; state: the shifts of ``W_y, W_q, W_k, w_b``."""

    def __init__(self, hidden: int, heads: int, head_dim: int, ff: int):
        super().__init__(hidden, heads, head_dim, ff, y_dim=head_dim, stateful=True)
        self.finish_layer(hidden, ff)

    def memory(self, x: Tensor, state: State, firsts: Tensor, detach: bool) -> tuple[Tensor, State]:
        xs = self.hook_x(full_precision(self.split_heads(x)).softmax(-1))
        base = full_precision(self.base_weights())

        def cell(inputs: tuple[Tensor, ...], state: State) -> tuple[Tensor, State]:
            return self.srwm_cell(base, inputs[0], state)

        read, state = scan(cell, (xs,), state, firsts, detach, self.state_hooks())
        return self.out_proj(self.hook_read(read).flatten(-2)), state


class SRDeltaLayer(_SelfReferentialLayer):
    """An SRWM emitting delta-rule keys/values: state ``W_y`` (``d x 3d+1``), ``W_q, W_k, w_b`` and ``F``."""

    def __init__(self, hidden: int, heads: int, head_dim: int, ff: int):
        super().__init__(hidden, heads, head_dim, ff, y_dim=3 * head_dim + 1, stateful=True)
        self.state_shapes["F"] = (heads, head_dim, head_dim)
        self.finish_layer(hidden, ff)

    def memory(self, x: Tensor, state: State, firsts: Tensor, detach: bool) -> tuple[Tensor, State]:
        xs = self.hook_x(full_precision(self.split_heads(x)).softmax(-1))
        base = full_precision(self.base_weights())
        d = self.head_dim

        def cell(inputs: tuple[Tensor, ...], state: State) -> tuple[Tensor, State]:
            y, new = self.srwm_cell(base, inputs[0], state)
            q, k, v, b = y.split([d, d, d, 1], dim=-1)
            read, new["F"] = delta_rule(state["F"], q.softmax(-1), k.softmax(-1), v, torch.sigmoid(b))
            return read, new

        read, state = scan(cell, (xs,), state, firsts, detach, self.state_hooks())
        return self.out_proj(self.hook_read(read).flatten(-2)), state


class NoCarrySRLayer(_SelfReferentialLayer):
    """The SRWM reset to its base weights every step: ``y = softmax(h) W^y_base``; no state."""

    def __init__(self, hidden: int, heads: int, head_dim: int, ff: int):
        super().__init__(hidden, heads, head_dim, ff, y_dim=head_dim, stateful=False)
        self.finish_layer(hidden, ff)

    def memory(self, x: Tensor, state: State, firsts: Tensor, detach: bool) -> tuple[Tensor, State]:
        xs = self.hook_x(self.split_heads(x).softmax(-1))
        # read through all four base matrices so W_q, W_k, w_b stay in the graph (with zero
        # gradient, as in the original kernel): DDP then needs no find_unused_parameters
        read = torch.einsum("tbhi,hij->tbhj", xs, self.base_weights())[..., : self.head_dim]
        return self.out_proj(self.hook_read(read).flatten(-2)), state


class FakeSRLayer(TransformerLayer):
    """Static per-head ``d x d`` matrices on the raw residual: ``out = h + W_o concat_h(h_h W^y_h)``."""

    def __init__(self, hidden: int, heads: int, head_dim: int, ff: int):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.W_y = nn.Parameter(torch.empty(heads, head_dim, head_dim))
        nn.init.normal_(self.W_y, std=1 / math.sqrt(head_dim))
        self.out_proj = nn.Linear(heads * head_dim, hidden, bias=False)
        self.finish_layer(hidden, ff)

    def memory(self, x: Tensor, state: State, firsts: Tensor, detach: bool) -> tuple[Tensor, State]:
        read = torch.einsum("tbhi,hij->tbhj", x.view(*x.shape[:-1], self.heads, self.head_dim), self.W_y)
        return self.out_proj(self.hook_read(read).flatten(-2)), state


def _transformer(layer: type[TransformerLayer], config: AgentConfig, in_dim: int) -> Core:
    layers = [
        layer(config.hidden, config.num_heads, config.head_dim, config.ff) for _ in range(config.num_layers)
    ]
    return Core(in_dim, layers, out_dim=config.hidden, project_to=config.hidden)


@register_core("srwm")
def build_srwm(config: AgentConfig, in_dim: int) -> Core:
    return _transformer(SRWMLayer, config, in_dim)


@register_core("fake_sr")
def build_fake_sr(config: AgentConfig, in_dim: int) -> Core:
    return _transformer(FakeSRLayer, config, in_dim)


@register_core("sr_delta")
def build_sr_delta(config: AgentConfig, in_dim: int) -> Core:
    return _transformer(SRDeltaLayer, config, in_dim)


@register_core("no_carry_sr")
def build_no_carry_sr(config: AgentConfig, in_dim: int) -> Core:
    return _transformer(NoCarrySRLayer, config, in_dim)
