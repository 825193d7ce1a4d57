"""Generalised Advantage Estimation (Schulman et al. 2016).

Timestep convention (proclab-wide): row ``t`` holds ``obs_t``, the value ``V(obs_t)``, the
reward that action ``a_t`` earned and ``done_t`` = the episode ended after ``a_t`` (terminated
or truncated). Procgen resets by itself, so a truncated episode's last observation is never
seen and cannot be bootstrapped from; proclab, like the Procgen paper, treats it as an end.
"""

from __future__ import annotations

import torch


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns (= advantages + values) for time-major ``(T, N)`` tensors.

    ``next_value`` is ``V(obs_T)``, the value of the observation after the rollout.
    """
    T = rewards.shape[0]
    advantages = torch.empty_like(values, dtype=torch.float32)
    running = torch.zeros_like(next_value, dtype=torch.float32)
    not_done = 1.0 - dones.float()
    for t in reversed(range(T)):
        v_next = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * v_next * not_done[t] - values[t]
        running = delta + gamma * lam * not_done[t] * running
        advantages[t] = running
    return advantages, advantages + values
