"""``step`` applied T times equals ``unroll`` over T, for every core, with resets mid-sequence;
and a reset really restores the initial state."""

from __future__ import annotations

import pytest
import torch

from proclab.models import CORES

ALL_CORES = sorted(CORES)
STATEFUL_CORES = ["delta", "gru", "lstm", "sr_delta", "srwm"]


def test_exactly_the_memory_cores_carry_state(tiny_agent):
    stateful = [c for c in ALL_CORES if tiny_agent(c).initial_state(2)]
    assert stateful == STATEFUL_CORES


@pytest.mark.parametrize("detach", [False, True])
@pytest.mark.parametrize("core", ALL_CORES)
def test_step_times_T_equals_unroll(core, detach, tiny_agent, random_inputs, random_state):
    agent = tiny_agent(core, detach_every_step=detach)
    T, B = 6, 3
    obs, firsts, rewards = random_inputs(T, B)
    state0 = random_state(agent, B)
    with torch.no_grad():
        out, final = agent.unroll(obs, state0, firsts, rewards)
        state, logits, values = state0, [], []
        for t in range(T):
            o, state = agent.step(obs[t], state, firsts[t], rewards[t])
            logits.append(o.logits)
            values.append(o.value)
    assert out.logits.shape == (T, B, agent.config.num_actions) and out.value.shape == (T, B)
    assert o.logits.shape == (B, agent.config.num_actions) and o.value.shape == (B,)
    torch.testing.assert_close(torch.stack(logits), out.logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.stack(values), out.value, rtol=1e-5, atol=1e-5)
    assert final.keys() == state.keys() == state0.keys()
    for k in final:
        assert final[k].shape == state0[k].shape
        torch.testing.assert_close(final[k], state[k], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("core", STATEFUL_CORES)
def test_first_resets_to_initial_state(core, tiny_agent, random_inputs, random_state):
    """A row reset at step s continues exactly like a fresh agent started at s."""
    agent = tiny_agent(core)
    T, B, s = 5, 2, 3
    obs, _, rewards = random_inputs(T, B)
    firsts = torch.zeros(T, B, dtype=torch.bool)
    firsts[s] = True
    with torch.no_grad():
        out, final = agent.unroll(obs, random_state(agent, B), firsts, rewards)
        fresh, fresh_final = agent.unroll(obs[s:], agent.initial_state(B), firsts[s:], rewards[s:])
        no_reset, _ = agent.unroll(obs, random_state(agent, B), torch.zeros_like(firsts), rewards)
    torch.testing.assert_close(out.logits[s:], fresh.logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.value[s:], fresh.value, rtol=1e-5, atol=1e-5)
    for k in final:
        torch.testing.assert_close(final[k], fresh_final[k], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(no_reset.logits[s:], fresh.logits, atol=1e-6)  # the state mattered


@pytest.mark.parametrize("core", STATEFUL_CORES)
def test_state_is_carried_between_steps(core, tiny_agent, random_inputs):
    """Outputs depend on earlier frames (the core really remembers)."""
    agent = tiny_agent(core)
    obs, _, rewards = random_inputs(4, 2)
    firsts = torch.zeros(4, 2, dtype=torch.bool)
    other = obs.clone()
    other[0] = 255 - other[0]
    with torch.no_grad():
        a, _ = agent.unroll(obs, agent.initial_state(2), firsts, rewards)
        b, _ = agent.unroll(other, agent.initial_state(2), firsts, rewards)
    assert not torch.allclose(a.logits[-1], b.logits[-1], atol=1e-7)
