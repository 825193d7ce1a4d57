"""Policy and value heads: two linear maps from the core's output.

The outputs are cast to (at least) float32 *before* their hook points, so that under bf16
autocast the sampler, the losses and any hook all see full-precision logits and values; a
float64 agent (finite-difference checks of saliency) keeps float64.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from proclab.models.cores.base import full_precision
from proclab.models.hooks import HookPoint


class PolicyValueHeads(nn.Module):
    """``(..., D)`` -> logits ``(..., num_actions)`` and value ``(...)``, both float32 (or float64)."""

    def __init__(self, in_dim: int, num_actions: int):
        super().__init__()
        self.policy = nn.Linear(in_dim, num_actions)
        self.value = nn.Linear(in_dim, 1)
        self.hook_logits = HookPoint()
        self.hook_value = HookPoint()

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        logits = self.hook_logits(full_precision(self.policy(x)))
        value = self.hook_value(full_precision(self.value(x).squeeze(-1)))
        return logits, value

    def init_orthogonal(self, policy_gain: float = 0.01, value_gain: float = 1.0) -> None:
        """Orthogonal weights (gain 0.01 policy / 1 value) and zero biases, as in interpreting-rl-behavior."""
        with torch.no_grad():
            for layer, gain in ((self.policy, policy_gain), (self.value, value_gain)):
                nn.init.orthogonal_(layer.weight, gain=gain)
                nn.init.zeros_(layer.bias)
