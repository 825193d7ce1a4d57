"""The ``delta`` core: Delta Net (linear transformer with the delta update rule), modern-srwm dims.

Per layer and head ``h`` (row-vector convention, ``F`` is ``d x d``; spec §2.3):

    [q, k, v, b] = LN(x) W_slow            (no bias; per head 3d + 1 outputs)
    phi(z) = (elu(z) + 1) / (sum(elu(z) + 1) + 1e-5),  q <- phi(q), k <- phi(k),  beta = sigmoid(b)
    F_t = F_{t-1} + k^T beta (v - k F_{t-1})
    o_t = q F_t                             (read *after* the update)
    out = x + W_o concat_h(o_t),  then the feed-forward sub-layer

The slow projection, phi and W_o run on all ``T*B`` rows at once; the loop over time only does
the rank-one update and the read. ``W_slow``'s outputs are laid out head-major: head ``h`` owns
columns ``[h(3d+1), (h+1)(3d+1))`` split as ``q, k, v, b``. The layer's LayerNorm is applied
(unlike the SR layers', see :mod:`.self_referential`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from proclab.models.cores.base import Core, State, TransformerLayer, full_precision, scan
from proclab.models.cores.registry import register_core
from proclab.models.hooks import HookPoint

if TYPE_CHECKING:
    from proclab.models.config import AgentConfig

PHI_EPS = 1e-5


def phi(z: Tensor) -> Tensor:
    """The Delta Net feature map: elu + 1, normalised to sum to one over the last dim."""
    e = F.elu(z) + 1
    return e / (e.sum(-1, keepdim=True) + PHI_EPS)


def delta_rule(fast: Tensor, q: Tensor, k: Tensor, v: Tensor, beta: Tensor) -> tuple[Tensor, Tensor]:
    """One delta-rule step for all rows and heads: ``fast`` ``(B, H, d_k, d_v)``; ``q, k`` ``(B, H, d_k)``,
    ``v`` ``(B, H, d_v)``, ``beta`` ``(B, H, 1)``. Returns the read ``q F_t`` and ``F_t``."""
    v_old = torch.einsum("bhi,bhij->bhj", k, fast)
    fast = fast + torch.einsum("bhi,bhj->bhij", k, beta * (v - v_old))
    return torch.einsum("bhi,bhij->bhj", q, fast), fast


class DeltaLayer(TransformerLayer):
    """Delta Net memory sub-layer + feed-forward sub-layer; state ``F`` ``(B, H, d, d)``."""

    def __init__(self, hidden: int, heads: int, head_dim: int, ff: int):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.norm = nn.LayerNorm(hidden)
        self.slow = nn.Linear(hidden, heads * (3 * head_dim + 1), bias=False)
        self.hook_q = HookPoint()  # phi(q), (T, B, H, d)
        self.hook_k = HookPoint()  # phi(k)
        self.hook_v = HookPoint()
        self.hook_beta = HookPoint()  # (T, B, H, 1)
        self.out_proj = nn.Linear(heads * head_dim, hidden, bias=False)
        self.state_shapes = {"F": (heads, head_dim, head_dim)}
        self.finish_layer(hidden, ff)

    @staticmethod
    def cell(inputs: tuple[Tensor, ...], state: State) -> tuple[Tensor, State]:
        q, k, v, beta = inputs
        read, fast = delta_rule(state["F"], q, k, v, beta)
        return read, {"F": fast}

    def memory(self, x: Tensor, state: State, firsts: Tensor, detach: bool) -> tuple[Tensor, State]:
        T, B, _ = x.shape
        d = self.head_dim
        p = full_precision(self.slow(self.norm(x))).view(T, B, self.heads, 3 * d + 1)
        q, k, v, b = p.split([d, d, d, 1], dim=-1)
        q, k = self.hook_q(phi(q)), self.hook_k(phi(k))
        v, beta = self.hook_v(v), self.hook_beta(torch.sigmoid(b))
        read, state = scan(self.cell, (q, k, v, beta), state, firsts, detach, self.state_hooks())
        return self.out_proj(self.hook_read(read).flatten(-2)), state


@register_core("delta")
def build_delta(config: AgentConfig, in_dim: int) -> Core:
    layers = [
        DeltaLayer(config.hidden, config.num_heads, config.head_dim, config.ff)
        for _ in range(config.num_layers)
    ]
    return Core(in_dim, layers, out_dim=config.hidden, project_to=config.hidden)
