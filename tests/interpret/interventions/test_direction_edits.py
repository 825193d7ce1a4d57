"""Direction edits played by the one agent wrapper: identity edits are bit-identical, collapse/move/exchange
act on exactly the coordinates they name, step x T equals unroll with resets, and a planted agent reacts as
predicted."""

import numpy as np
import pytest
import torch

from proclab.errors import ProclabError
from proclab.interpret.bases.coordinates import LinearCoordinates
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.interventions.direction_edits import DirectionEdit
from proclab.models import AgentConfig, build_agent
from proclab.models.edited import Intervened
from support import TINY_AGENT

T, B, D = 7, 3, 16


@pytest.fixture(scope="module")
def basis():
    x = np.random.default_rng(0).normal(size=(400, D)) @ np.random.default_rng(1).normal(size=(D, D)) * 0.3
    return Basis.fit(x.astype(np.float32), BasisConfig(n_ics=4), {"activation": "state_out/core.0.h"})


def make_agent(core="gru"):
    torch.manual_seed(0)
    return build_agent(AgentConfig(core=core, rnn_size=D, **TINY_AGENT)).eval()


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    obs = torch.randint(0, 256, (T, B, 3, 64, 64), generator=g, dtype=torch.uint8)
    firsts = torch.zeros(T, B, dtype=torch.bool)
    firsts[0] = True
    firsts[4, 1] = True  # a reset inside the sequence
    return obs, firsts


def intervened(agent, basis, kind: str, edit: DirectionEdit, key: str) -> Intervened:
    return Intervened(agent, [edit.intervention(LinearCoordinates(basis, kind), key)])


def stepwise(agent, obs, firsts, state):
    outs = []
    for t in range(T):
        out, state = agent.step(obs[t], state, firsts[t])
        outs.append(out)
    return torch.stack([o.logits for o in outs]), torch.stack([o.value for o in outs]), state


@pytest.mark.parametrize("core,key", [("gru", "core.0.h"), ("lstm", "core.0.h"), ("lstm", "core.0.c")])
@pytest.mark.parametrize("spec", [("move", "2:2"), ("exchange", "1:1")])
def test_identity_edits_are_bit_identical(basis, core, key, spec):
    agent = make_agent(core)
    wrapped = intervened(agent, basis, "ica", DirectionEdit.parse(*spec), key)
    obs, firsts = inputs()
    state = agent.initial_state(B)
    with torch.no_grad():
        plain, plain_state = agent.unroll(obs, state, firsts)
        edited, edited_state = wrapped.unroll(obs, state, firsts)
        step_logits, step_value, _ = stepwise(wrapped, obs, firsts, state)
        ref_logits, ref_value, _ = stepwise(agent, obs, firsts, state)
    assert torch.equal(plain.logits, edited.logits) and torch.equal(plain.value, edited.value)
    assert all(torch.equal(plain_state[k], edited_state[k]) for k in plain_state)
    assert torch.equal(step_logits, ref_logits) and torch.equal(step_value, ref_value)


def increments(agent, wrapped, obs, firsts):
    """Per step: the plain update the core proposed (the plain agent stepped from the edited history) and
    the edited one."""
    state = agent.initial_state(B)
    proposed, edited, prev = [], [], state["core.0.h"]
    with torch.no_grad():
        for t in range(T):
            _, plain_next = agent.step(obs[t], state, firsts[t])
            _, state = wrapped.step(obs[t], state, firsts[t])
            prev = prev * (~firsts[t]).float()[:, None]
            proposed.append(plain_next["core.0.h"] - prev)
            edited.append(state["core.0.h"] - prev)
            prev = state["core.0.h"]
    return torch.cat(proposed).double(), torch.cat(edited).double()


@pytest.mark.parametrize("kind", ["ica", "pca"])
@pytest.mark.parametrize("spec", [("collapse", "1"), ("move", "1:3"), ("exchange", "0:2")])
def test_edits_change_exactly_the_named_coordinates(basis, kind, spec):
    agent = make_agent()
    iv = DirectionEdit.parse(*spec)
    wrapped = intervened(agent, basis, kind, iv, "core.0.h")
    delta, new = increments(agent, wrapped, *inputs(1))
    c, c_new = basis.increment_coords(delta, kind), basis.increment_coords(new, kind)
    expected = c.clone()
    if iv.op == "collapse":
        expected[:, 1] = 0
    elif iv.op == "move":
        expected[:, 3] += c[:, 1]
        expected[:, 1] = 0
    else:
        expected[:, [0, 2]] = c[:, [2, 0]]
    assert c[:, iv.i].abs().max() > 1e-2  # the edit had something to act on
    assert (c_new - expected).abs().max() <= 1e-6
    d = torch.as_tensor(basis.directions(kind))
    residual, residual_new = delta - c @ d, new - c_new @ d
    assert (residual - residual_new).abs().max() <= 1e-6


def test_step_times_t_equals_unroll_with_resets(basis):
    agent = make_agent("lstm")
    wrapped = intervened(agent, basis, "ica", DirectionEdit.parse("collapse", "0"), "core.0.h")
    obs, firsts = inputs(2)
    state = {
        k: torch.randn(v.shape, generator=torch.Generator().manual_seed(3))
        for k, v in agent.initial_state(B).items()
    }
    with torch.no_grad():
        out, final = wrapped.unroll(obs, state, firsts)
        logits, value, final_steps = stepwise(wrapped, obs, firsts, state)
        plain, _ = agent.unroll(obs, state, firsts)
    torch.testing.assert_close(out.logits, logits, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.value, value, rtol=1e-5, atol=1e-6)
    for k in final:
        torch.testing.assert_close(final[k], final_steps[k], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(plain.logits, out.logits)  # the collapse did change the agent


def test_planted_agent_changes_actions_as_predicted(basis):
    """Logits 0 and 2 read +- coordinate 1 of the state, logit 1 is a small constant: the plain agent picks
    action 0 or 2 by the coordinate's sign; collapsing direction 1 keeps the coordinate at 0 (from the
    reset), so the intervened agent always picks action 1."""
    agent = make_agent()
    proj = basis.increment_coords(torch.eye(D, dtype=torch.float64), "ica")[:, 1].float()
    with torch.no_grad():
        agent.heads.policy.weight.zero_()
        agent.heads.policy.bias.zero_()
        agent.heads.policy.weight[0] = 1000 * proj
        agent.heads.policy.weight[2] = -1000 * proj
        agent.heads.policy.bias[1] = 0.05
    obs, firsts = inputs(4)
    wrapped = intervened(agent, basis, "ica", DirectionEdit.parse("collapse", "1"), "core.0.h")
    moved = intervened(agent, basis, "ica", DirectionEdit.parse("move", "0:1"), "core.0.h")
    with torch.no_grad():
        plain, _ = agent.unroll(obs, agent.initial_state(B), firsts)
        edited, _ = wrapped.unroll(obs, agent.initial_state(B), firsts)
        other, _ = moved.unroll(obs, agent.initial_state(B), firsts)
    plain_actions, edited_actions = plain.logits.argmax(-1), edited.logits.argmax(-1)
    assert (plain_actions != 1).sum() > T * B // 2
    assert (edited_actions == 1).all()
    assert edited.logits[..., 0].abs().max() < 1e-3
    assert not torch.allclose(other.logits[..., 0], plain.logits[..., 0])  # moving 0 onto 1 adds to it


def test_bad_interventions_are_one_line_errors(basis):
    with pytest.raises(ProclabError, match="I:J"):
        DirectionEdit.parse("move", "3")
    with pytest.raises(ProclabError, match="outside"):
        intervened(make_agent(), basis, "ica", DirectionEdit.parse("collapse", "9"), "core.0.h")
    with pytest.raises(ProclabError, match="hook point"):
        intervened(make_agent(), basis, "ica", DirectionEdit.parse("collapse", "0"), "core.0.c")
    with pytest.raises(ProclabError, match="carried state"):
        intervened(make_agent(), basis, "ica", DirectionEdit.parse("collapse", "0"), "hook:torso.hook_fc")
