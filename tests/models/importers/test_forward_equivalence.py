"""An imported agent computes what its source computed: log-probabilities and values of the
source's forward pass (re-implemented slowly in ``tests/foreign_agents.py``) over 40 steps x 8
environments with random frames, random episode starts and random previous rewards.

The reference runs in float64. proclab runs twice: in float64, where any slip in the mapping
(a transposed kernel, a shifted pooling window, a missed reset) shows far above the 1e-9
tolerance, and in float32 as agents are used, within 1e-5.
"""

from __future__ import annotations

import pytest
import torch

from foreign_agents import VARIANTS, log_softmax

T, B = 40, 8
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-9}


def _episode_inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    obs = torch.randint(0, 256, (T, B, 3, 64, 64), dtype=torch.uint8, generator=g)
    firsts = torch.rand(T, B, generator=g) < 0.1
    firsts[0] = True
    prev_rewards = torch.randn(T, B, generator=g) * 2  # beyond [-1, 1], so the clamp matters
    return obs, firsts, prev_rewards


def _worst_gaps(agent, dtype, inputs, reference):
    """Largest |log p - log p_ref| and |v - v_ref| over every step and environment."""
    agent = agent.to(dtype)
    obs, firsts, prev_rewards = inputs
    state = {k: v.to(dtype) for k, v in agent.initial_state(B).items()}
    worst_logp = worst_value = 0.0
    with torch.no_grad():
        for t in range(len(reference)):
            frames = obs[t] if dtype == torch.float32 else obs[t].to(dtype) / 255
            out, state = agent.step(frames, state, firsts[t], prev_rewards[t].to(dtype))
            ref_logits, ref_value = reference[t]
            gap = (log_softmax(ref_logits) - log_softmax(out.logits.double())).abs().max().item()
            worst_logp = max(worst_logp, gap)
            worst_value = max(worst_value, (ref_value - out.value.double()).abs().max().item())
    return worst_logp, worst_value


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_import_reproduces_the_source_forward_pass(imported, variant):
    ref, agent, _ = imported(variant)
    inputs = _episode_inputs()
    obs, firsts, prev_rewards = inputs
    reference, ref_state = [], ref.initial_state(B)
    for t in range(T):
        logits, value, ref_state = ref.step(obs[t], ref_state, firsts[t], prev_rewards[t])
        reference.append((logits, value))
    for dtype, tol in TOLERANCE.items():
        logp, value = _worst_gaps(agent, dtype, inputs, reference)
        assert logp <= tol, f"{variant} {dtype}: log-probabilities differ by {logp:.2e}"
        assert value <= tol, f"{variant} {dtype}: values differ by {value:.2e}"


def test_the_check_can_fail(imported):
    """The comparison sees a one-pixel shift of the pooling windows (the Flax padding detail)."""
    ref, agent, _ = imported("cleanba")
    inputs = _episode_inputs()
    reference = [ref.step(inputs[0][t], (), inputs[1][t])[:2] for t in range(2)]
    assert _worst_gaps(agent, torch.float64, inputs, reference)[0] <= TOLERANCE[torch.float64]
    agent.torso.block0.pool = torch.nn.MaxPool2d(3, stride=2, padding=1)
    assert _worst_gaps(agent, torch.float64, inputs, reference)[0] > 1e-3
