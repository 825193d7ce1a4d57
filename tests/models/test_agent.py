"""The agent as the other layers use it: torso wiring, initialisation, input formats,
previous reward, channels-last, bf16 autocast and inference mode."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from proclab.models import CORES, build_agent

ALL_CORES = sorted(CORES)


def _reference_torso(torso, x):
    """The IMPALA ResNet written out with functional ops (pre-activation residual blocks)."""
    for block in torso.blocks():
        x = F.conv2d(x, block.conv.weight, block.conv.bias, padding=1)
        x = F.max_pool2d(x, 3, stride=2, padding=1)
        for res in (block.res0, block.res1):
            h = F.conv2d(F.relu(x), res.conv0.weight, res.conv0.bias, padding=1)
            x = x + F.conv2d(F.relu(h), res.conv1.weight, res.conv1.bias, padding=1)
    x = F.relu(x).flatten(1)
    return F.relu(x @ torso.fc.weight.T + torso.fc.bias)


def test_torso_matches_the_impala_resnet(tiny_agent):
    agent = tiny_agent("none")
    x = torch.rand(3, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(agent.torso(x), _reference_torso(agent.torso, x))
    assert agent.torso.fc.in_features == agent.config.widths[-1] * 8 * 8


def test_features_concatenate_the_clamped_previous_reward(tiny_agent, random_inputs):
    agent = tiny_agent("none")
    obs, firsts, _ = random_inputs(2, 3)
    rewards = torch.tensor([[-7.0, 0.25, 1.0], [3.0, -1.0, 0.0]])
    from proclab.models import capture

    with torch.no_grad(), capture(agent, ["hook_features", "torso.hook_fc"]) as acts:
        out, _ = agent.unroll(obs, {}, firsts, rewards)
        out_clamped, _ = agent.unroll(obs, {}, firsts, rewards.clamp(-1, 1))
    feats = acts.calls("hook_features")[0]
    torch.testing.assert_close(feats[..., -1], rewards.clamp(-1, 1))
    torch.testing.assert_close(feats[..., :-1], acts.calls("torso.hook_fc")[0].view(2, 3, -1))
    torch.testing.assert_close(out.logits, out_clamped.logits)
    with pytest.raises(ValueError, match="prev_rewards"):
        agent.unroll(obs, {}, firsts)
    plain = tiny_agent("none", prev_reward=False)
    assert plain.core.out_dim == plain.config.fc
    plain.unroll(obs, {}, firsts)  # no reward needed


def test_interp_and_orthogonal_initialisation(tiny_agent):
    agent = tiny_agent("gru", torso_init="xavier", head_init="orthogonal", rnn_size=32)
    w = agent.heads.policy.weight  # (A, D), A < D: orthonormal rows scaled by the gain
    torch.testing.assert_close(w @ w.T, 0.01**2 * torch.eye(w.shape[0]), atol=1e-7, rtol=1e-5)
    torch.testing.assert_close(agent.heads.value.weight.norm(), torch.tensor(1.0))
    assert not agent.heads.policy.bias.any() and not agent.heads.value.bias.any()
    convs = [m for m in agent.torso.modules() if isinstance(m, torch.nn.Conv2d | torch.nn.Linear)]
    assert all(not m.bias.any() for m in convs)
    default = tiny_agent("gru", head_init="torch")
    assert default.heads.policy.bias.any() and all(
        m.bias.any() for m in default.torso.modules() if isinstance(m, torch.nn.Conv2d)
    )


def test_state_shapes_and_device(tiny_agent):
    agent = tiny_agent("srwm")
    state = agent.initial_state(5)
    assert set(state) == {f"core.{i}.{n}" for i in range(2) for n in ("W_y", "W_q", "W_k", "w_b")}
    assert state["core.0.w_b"].shape == (5, 4, 4, 4) and state["core.1.W_y"].shape == (5, 4, 4, 4)
    assert all(v.dtype == torch.float32 and v.device.type == "cpu" for v in state.values())
    assert set(tiny_agent("sr_delta").initial_state(1)) == {
        f"core.{i}.{n}" for i in range(2) for n in ("W_y", "W_q", "W_k", "w_b", "F")
    }
    assert tiny_agent("sr_delta").initial_state(2)["core.0.W_y"].shape == (2, 4, 4, 13)
    assert set(tiny_agent("lstm").initial_state(1)) == {"core.0.h", "core.0.c"}
    with pytest.raises(ValueError, match="state keys"):
        agent.step(
            torch.zeros(5, 3, 64, 64, dtype=torch.uint8), {}, torch.zeros(5, dtype=torch.bool), torch.zeros(5)
        )


@pytest.mark.parametrize("core", ALL_CORES)
def test_channels_last_inference_mode_on_env_buffers(core, tiny_agent, random_inputs):
    """Env frames are channels-first views of a channels-last numpy buffer; acting runs under inference_mode."""
    agent = tiny_agent(core)
    B = 3
    hwc = np.random.default_rng(0).integers(0, 256, (B, 64, 64, 3), dtype=np.uint8)
    obs = torch.from_numpy(hwc.transpose(0, 3, 1, 2))  # what ProcgenVecEnv returns
    assert obs.is_contiguous(memory_format=torch.channels_last)
    first = torch.tensor([True, False, True])
    reward = torch.zeros(B)
    with torch.inference_mode():
        ref, ref_state = agent.step(obs.contiguous(), agent.initial_state(B), first, reward)
        agent.channels_last()
        assert agent.torso.block0.conv.weight.is_contiguous(memory_format=torch.channels_last)
        out, state = agent.step(obs, agent.initial_state(B), first, reward)
        state_in = {k: v.clone() for k, v in state.items()}
        out2, _ = agent.step(obs, state, ~first, reward)
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.value, ref.value, rtol=1e-4, atol=1e-5)
    for k in state:  # inputs are never modified in place
        torch.testing.assert_close(state[k], state_in[k], rtol=0, atol=0)
        torch.testing.assert_close(state[k], ref_state[k], rtol=1e-4, atol=1e-5)
    assert out2.logits.shape == (B, agent.config.num_actions)
    agent.channels_last(False)
    assert agent.torso.block0.conv.weight.is_contiguous()


@pytest.mark.parametrize("core", ALL_CORES)
def test_bf16_autocast_channels_last_close_to_fp32(core, tiny_agent, random_inputs):
    agent = tiny_agent(core)
    T, B = 4, 3
    obs, firsts, rewards = random_inputs(T, B)
    with torch.no_grad():
        ref, ref_state = agent.unroll(obs, agent.initial_state(B), firsts, rewards)
        agent.channels_last()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, state = agent.unroll(obs, agent.initial_state(B), firsts, rewards)
    assert out.logits.dtype == out.value.dtype == torch.float32
    assert all(v.dtype == torch.float32 for v in state.values())  # the recurrence stays in fp32
    scale = ref.logits.abs().max() + ref.value.abs().max()
    assert (out.logits - ref.logits).abs().max() <= 0.05 * scale
    assert (out.value - ref.value).abs().max() <= 0.05 * scale
    for k in state:
        assert (state[k] - ref_state[k]).abs().max() <= 0.05 * (ref_state[k].abs().max() + 1e-3)


def test_training_step_with_bf16_autocast_backpropagates(tiny_agent, random_inputs):
    agent = tiny_agent("srwm").channels_last()
    obs, firsts, rewards = random_inputs(3, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = agent.unroll(obs, agent.initial_state(2), firsts, rewards)
        loss = out.logits.logsumexp(-1).sum() + out.value.square().sum()
    loss.backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in agent.parameters())


def test_forward_is_unroll(tiny_agent, random_inputs):
    agent = tiny_agent("lstm")
    obs, firsts, rewards = random_inputs(2, 2)
    with torch.no_grad():
        a, _ = agent(obs, agent.initial_state(2), firsts, rewards)
        b, _ = agent.unroll(obs, agent.initial_state(2), firsts, rewards)
    torch.testing.assert_close(a.logits, b.logits)


def test_build_agent_is_seeded_by_torch(tiny_config):
    torch.manual_seed(7)
    a = build_agent(tiny_config("delta"))
    torch.manual_seed(7)
    b = build_agent(tiny_config("delta"))
    for (n, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, msg=n)
