"""Gradient semantics: true BPTT within an unroll by default; ``detach_every_step`` reproduces
the published modern-srwm code (state cut every step, so SRWM's W_q, W_k, w_b get no gradient)."""

from __future__ import annotations

import pytest
import torch

from proclab.models import CORES

ALL_CORES = sorted(CORES)
STATEFUL_CORES = ["delta", "gru", "lstm", "sr_delta", "srwm"]
SR_GENERATORS = ("W_q", "W_k", "w_b")  # the matrices that generate q, k and beta in an SR layer


def _loss(out):
    g = torch.Generator().manual_seed(9)
    w = torch.randn(out.logits.shape, generator=g)
    return (out.logits * w).sum() + out.value.square().sum()


def _grads(agent, random_inputs, T=5, B=2):
    obs, _, rewards = random_inputs(T, B)
    firsts = torch.zeros(T, B, dtype=torch.bool)
    agent.zero_grad(set_to_none=True)
    out, _ = agent.unroll(obs, agent.initial_state(B), firsts, rewards)
    _loss(out).backward()
    return {n: p.grad for n, p in agent.named_parameters()}


def _without_gradient(grads):
    """Parameters whose gradient is None or exactly zero (the published code: "not in the graph")."""
    return {n for n, g in grads.items() if g is None or not g.abs().max() > 0}


def _expected_without_gradient(core, detach, num_layers):
    if core == "no_carry_sr" or (detach and core in ("srwm", "sr_delta")):
        return {f"core.{i}.{m}" for i in range(num_layers) for m in SR_GENERATORS}
    return set()


@pytest.mark.parametrize("detach", [False, True])
@pytest.mark.parametrize("core", ALL_CORES)
def test_which_parameters_receive_gradient(core, detach, tiny_agent, random_inputs):
    agent = tiny_agent(core, detach_every_step=detach)
    grads = _grads(agent, random_inputs)
    assert _without_gradient(grads) == _expected_without_gradient(core, detach, agent.config.num_layers)


@pytest.mark.parametrize("core", STATEFUL_CORES)
def test_gradient_crosses_time_only_with_bptt(core, tiny_agent, random_inputs):
    """d(last step's outputs)/d(first frame) is nonzero with BPTT and exactly zero when detached."""
    T, B = 4, 2
    obs, _, rewards = random_inputs(T, B)
    frames = (obs.float() / 255).requires_grad_()
    firsts = torch.zeros(T, B, dtype=torch.bool)
    for detach in (False, True):
        agent = tiny_agent(core, detach_every_step=detach)
        frames.grad = None
        out, _ = agent.unroll(frames, agent.initial_state(B), firsts, rewards)
        (out.logits[-1].sum() + out.value[-1].sum()).backward()
        reached = frames.grad[0].abs().max() > 0
        assert bool(reached) is (not detach)


@pytest.mark.parametrize("core", ALL_CORES)
def test_step_is_differentiable_in_obs_and_incoming_state(core, tiny_agent, random_inputs, random_state):
    """The world model feeds predicted (float) frames and the agent's own state through a frozen agent."""
    agent = tiny_agent(core).requires_grad_(False)
    obs, _, rewards = random_inputs(1, 3)
    frames = (obs[0].float() / 255).requires_grad_()
    state = {k: v.requires_grad_() for k, v in random_state(agent, 3).items()}
    out, new = agent.step(frames, state, torch.zeros(3, dtype=torch.bool), rewards[0])
    loss = out.logits.sum() + out.value.sum() + sum(v.sum() for v in new.values())
    loss.backward()
    assert frames.grad is not None and frames.grad.abs().max() > 0
    for k, v in state.items():
        assert v.grad is not None and v.grad.abs().max() > 0, k
    # and with the published semantics the incoming state is cut off
    agent = tiny_agent(core, detach_every_step=True).requires_grad_(False)
    state = {k: v.detach().requires_grad_() for k, v in state.items()}
    out, new = agent.step(frames, state, torch.zeros(3, dtype=torch.bool), rewards[0])
    (out.logits.sum() + out.value.sum() + sum(v.sum() for v in new.values())).backward()
    assert all(v.grad is None for v in state.values())


def test_float_obs_used_as_is_uint8_divided(tiny_agent, random_inputs):
    agent = tiny_agent("gru")
    obs, firsts, rewards = random_inputs(2, 2)
    with torch.no_grad():
        a, _ = agent.unroll(obs, agent.initial_state(2), firsts, rewards)
        b, _ = agent.unroll(obs.double().div(255).float(), agent.initial_state(2), firsts, rewards)
        c, _ = agent.unroll(obs.float(), agent.initial_state(2), firsts, rewards)  # not rescaled
    torch.testing.assert_close(a.logits, b.logits)
    assert not torch.allclose(a.logits, c.logits)


@pytest.mark.parametrize("detach", [False, True])
@pytest.mark.parametrize("core", ALL_CORES)
def test_every_parameter_is_in_the_graph(core, detach, tiny_agent, random_inputs):
    """No parameter is unused (a zero gradient is fine): DDP needs no find_unused_parameters."""
    grads = _grads(tiny_agent(core, detach_every_step=detach), random_inputs)
    assert [n for n, g in grads.items() if g is None] == []
