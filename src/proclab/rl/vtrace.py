"""V-trace off-policy targets (Espeholt et al. 2018, "IMPALA", section 4.1).

Actors act with a behaviour policy mu that lags the learner's policy pi by a few updates.
V-trace corrects for that lag with truncated importance weights rho_s = pi(a_s|x_s) / mu(a_s|x_s):

    delta_s = min(rho_bar, rho_s) * (r_s + gamma_s V(x_{s+1}) - V(x_s))
    v_s     = V(x_s) + delta_s + gamma_s min(c_bar, rho_s) (v_{s+1} - V(x_{s+1}))
    A_s     = min(pg_rho_bar, rho_s) * (r_s + gamma_s v_{s+1} - V(x_s))

over an unroll ``s = 0..T-1``, with ``V(x_T)`` (the bootstrap value) standing in for both
``V(x_{s+1})`` and ``v_{s+1}`` at ``s = T-1``. ``gamma_s`` is the discount *after* step ``s``: 0
where the episode ended, so nothing flows across an episode boundary. ``v_s`` is the value
target; ``A_s`` the policy-gradient advantage. On-policy (all rho = 1, rho_bar = c_bar = 1)
``v_s`` is the n-step bootstrapped return, i.e. GAE's return with lambda = 1.

All tensors are time-major ``(T, B)``; nothing here takes gradients.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class VTraceReturns(NamedTuple):
    vs: torch.Tensor  # (T, B) value targets v_s
    pg_advantages: torch.Tensor  # (T, B) policy-gradient advantages A_s
    rhos: torch.Tensor  # (T, B) untruncated importance weights pi/mu (for logging)


@torch.no_grad()
def vtrace(
    behaviour_logprobs: torch.Tensor,
    target_logprobs: torch.Tensor,
    rewards: torch.Tensor,
    discounts: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    pg_rho_bar: float = 1.0,
) -> VTraceReturns:
    """V-trace targets for one batch of unrolls.

    ``behaviour_logprobs``/``target_logprobs``: log mu(a_s|x_s) and log pi(a_s|x_s) of the taken
    actions; ``discounts``: gamma_s (0 after an episode's last step); ``values``: V(x_s);
    ``bootstrap_value``: V(x_T), shape ``(B,)``.
    """
    rhos = torch.exp(target_logprobs.float() - behaviour_logprobs.float())
    clipped_rhos = rhos.clamp(max=rho_bar)
    cs = rhos.clamp(max=c_bar)
    values = values.float()
    bootstrap_value = bootstrap_value.float()
    values_next = torch.cat([values[1:], bootstrap_value.unsqueeze(0)])
    deltas = clipped_rhos * (rewards + discounts * values_next - values)

    # v_s - V(x_s) = delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})), backwards from v_T - V(x_T) = 0.
    vs_minus_v = torch.empty_like(values)
    acc = torch.zeros_like(bootstrap_value)
    for s in reversed(range(values.shape[0])):
        acc = deltas[s] + discounts[s] * cs[s] * acc
        vs_minus_v[s] = acc
    vs = vs_minus_v + values

    vs_next = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)])
    pg_advantages = rhos.clamp(max=pg_rho_bar) * (rewards + discounts * vs_next - values)
    return VTraceReturns(vs=vs, pg_advantages=pg_advantages, rhos=rhos)
