"""Hook points on every activation; ``capture`` reads them and ``patch`` replaces them, on every core."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
import torch

from proclab.errors import ProclabError
from proclab.models import CORES, HookPoint, capture, patch

ALL_CORES = sorted(CORES)
STATEFUL_CORES = ["delta", "gru", "lstm", "sr_delta", "srwm"]


@pytest.mark.parametrize("core", ALL_CORES)
def test_every_activation_has_a_hook_point(core, tiny_agent):
    agent = tiny_agent(core)
    names = agent.hook_names()
    assert len(names) == len(set(names))
    assert all(isinstance(agent.get_submodule(n), HookPoint) for n in names)
    required = [
        "torso.hook_relu",
        "torso.hook_fc",
        "hook_features",
        "core.hook_out",
        "heads.hook_logits",
        "heads.hook_value",
    ]
    for i in range(len(agent.config.widths)):
        required += [f"torso.block{i}.hook_conv", f"torso.block{i}.hook_pool", f"torso.block{i}.hook_out"]
        required += [f"torso.block{i}.res{j}.{h}" for j in (0, 1) for h in ("hook_hidden", "hook_out")]
    for key in agent.state_shapes():  # core.<l>.X -> core.<l>.hook_X
        layer, name = key.rsplit(".", 1)
        required.append(f"{layer}.hook_{name}")
    if core != "none":
        required += [f"core.{i}.hook_out" for i in range(len(agent.core.layers()))]
    assert set(required) <= set(names)
    assert (
        names.index("torso.block0.hook_conv")
        < names.index("hook_features")
        < names.index("heads.hook_logits")
    )
    # the ReLUs are modules (hookable by captum and plain forward hooks too)
    assert (
        sum(isinstance(m, torch.nn.ReLU) for m in agent.torso.modules()) == 4 * len(agent.config.widths) + 2
    )


@pytest.mark.parametrize("core", ALL_CORES)
def test_capture_reads_every_hook_with_documented_shapes(core, tiny_agent, random_inputs):
    agent = tiny_agent(core)
    T, B = 4, 2
    obs, firsts, rewards = random_inputs(T, B)
    with torch.no_grad(), capture(agent) as acts:
        out, final = agent.unroll(obs, agent.initial_state(B), firsts, rewards)
    assert set(acts) == set(agent.hook_names())  # every hook fired
    torch.testing.assert_close(acts["heads.hook_logits"], out.logits)
    torch.testing.assert_close(acts["heads.hook_value"], out.value)
    assert acts["torso.hook_fc"].shape == (T * B, agent.config.fc)
    assert acts["hook_features"].shape == (T, B, agent.config.fc + 1)
    assert acts["torso.block0.hook_pool"].shape == (T * B, agent.config.widths[0], 32, 32)
    for key, value in final.items():  # per-step state hooks are stacked over time
        layer, name = key.rsplit(".", 1)
        stacked = acts[f"{layer}.hook_{name}"]
        assert stacked.shape == (T, *value.shape)
        torch.testing.assert_close(stacked[-1], value)
        assert len(acts.calls(f"{layer}.hook_{name}")) == T
    assert acts["core.hook_out"].shape[:2] == (T, B)
    assert all(not p._forward_hooks for p in agent.modules())  # hooks removed on exit


@pytest.mark.parametrize("core", ALL_CORES)
def test_capture_over_steps_equals_capture_over_unroll(core, tiny_agent, random_inputs):
    agent = tiny_agent(core)
    T, B = 3, 2
    obs, firsts, rewards = random_inputs(T, B)
    with torch.no_grad():
        with capture(agent) as by_unroll:
            agent.unroll(obs, agent.initial_state(B), firsts, rewards)
        with capture(agent) as by_step:
            state = agent.initial_state(B)
            for t in range(T):
                _, state = agent.step(obs[t], state, firsts[t], rewards[t])
    for name in agent.hook_names():
        torch.testing.assert_close(by_step[name], by_unroll[name], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("core", ALL_CORES)
def test_patch_replaces_activations(core, tiny_agent, random_inputs):
    agent = tiny_agent(core)
    obs, firsts, rewards = random_inputs(3, 2)
    with torch.no_grad():
        clean, _ = agent.unroll(obs, agent.initial_state(2), firsts, rewards)
        with patch(agent, "core.hook_out", torch.zeros_like):
            zeroed, _ = agent.unroll(obs, agent.initial_state(2), firsts, rewards)
        with patch(agent, "torso.block1.res0.hook_hidden", lambda a: a * 0.5):
            perturbed, _ = agent.unroll(obs, agent.initial_state(2), firsts, rewards)
        after, _ = agent.unroll(obs, agent.initial_state(2), firsts, rewards)
    # with the core's output zeroed, the heads output exactly their biases
    torch.testing.assert_close(zeroed.logits, agent.heads.policy.bias.expand_as(zeroed.logits))
    torch.testing.assert_close(zeroed.value, agent.heads.value.bias.expand_as(zeroed.value))
    assert not torch.allclose(perturbed.logits, clean.logits)
    torch.testing.assert_close(after.logits, clean.logits)  # patch removed on exit


@pytest.mark.parametrize("core", STATEFUL_CORES)
def test_patching_the_state_changes_what_is_carried(core, tiny_agent, random_inputs, random_state):
    """Zeroing every state leaving each step = resetting before every step (fast-weight cores);
    for gru / lstm the output *is* the hidden state, so the patched zeros reach the heads."""
    agent = tiny_agent(core)
    T, B = 4, 2
    obs, _, rewards = random_inputs(T, B)
    no_resets = torch.zeros(T, B, dtype=torch.bool)
    state_hooks = [f"{k.rsplit('.', 1)[0]}.hook_{k.rsplit('.', 1)[1]}" for k in agent.state_shapes()]
    with torch.no_grad():
        clean, _ = agent.unroll(obs, agent.initial_state(B), no_resets, rewards)
        reset_always, _ = agent.unroll(obs, random_state(agent, B), torch.ones_like(no_resets), rewards)
        with ExitStack() as stack:
            for name in state_hooks:
                stack.enter_context(patch(agent, name, torch.zeros_like))
            patched, final = agent.unroll(obs, agent.initial_state(B), no_resets, rewards)
    assert all(v.abs().max() == 0 for v in final.values())
    assert not torch.allclose(clean.logits[1:], reset_always.logits[1:], atol=1e-6)
    if core in ("gru", "lstm"):
        torch.testing.assert_close(patched.logits, agent.heads.policy.bias.expand_as(patched.logits))
    else:
        torch.testing.assert_close(patched.logits, reset_always.logits, rtol=1e-5, atol=1e-6)


def test_capture_keeps_the_graph_unless_detached(tiny_agent, random_inputs):
    agent = tiny_agent("srwm")
    obs, firsts, rewards = random_inputs(2, 2)
    frames = (obs.float() / 255).requires_grad_()
    with capture(agent, ["torso.hook_fc", "core.0.hook_W_y"]) as acts:
        agent.unroll(frames, agent.initial_state(2), firsts, rewards)
    (grad,) = torch.autograd.grad(acts["torso.hook_fc"].sum(), frames)
    assert grad.abs().max() > 0
    with capture(agent, "torso.hook_fc", detach=True) as acts:
        agent.unroll(frames, agent.initial_state(2), firsts, rewards)
    assert not acts["torso.hook_fc"].requires_grad
    assert set(acts) == {"torso.hook_fc"} and len(acts) == 1


def test_hooks_work_under_inference_mode(tiny_agent, random_inputs):
    agent = tiny_agent("delta")
    obs, firsts, rewards = random_inputs(1, 2)
    with (
        torch.inference_mode(),
        capture(agent, "core.1.hook_F") as acts,
        patch(agent, "hook_features", torch.zeros_like),
    ):
        agent.step(obs[0], agent.initial_state(2), firsts[0], rewards[0])
    assert acts["core.1.hook_F"].shape == (1, 2, 4, 4, 4)


def test_unknown_hook_name_is_a_user_error(tiny_agent):
    agent = tiny_agent("lstm")
    with (
        pytest.raises(ProclabError, match=r"unknown hook point 'core\.0\.hook_hh'.*core\.0\.hook_h"),
        capture(agent, "core.0.hook_hh"),
    ):
        pass
    with pytest.raises(ProclabError), patch(agent, "nope", torch.zeros_like):
        pass
