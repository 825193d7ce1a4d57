"""The simulator: any agent core, open and closed loop agree, gradients reach the bottleneck via the agent."""

import pytest
import torch

from proclab.models import AgentConfig, build_agent
from proclab.models.loading import freeze
from proclab.models.scripted import ScriptedAgent
from proclab.worldmodel.batch import synthetic_batch
from proclab.worldmodel.config import wm_size
from proclab.worldmodel.losses import world_model_loss
from proclab.worldmodel.model import WorldModel
from proclab.worldmodel.simulate import dreamed, random_bottlenecks, teacher_forced
from support import TINY_AGENT

TINY = wm_size("tiny")
CORES = {
    "gru": AgentConfig(core="gru", rnn_size=16, head_init="torch", **TINY_AGENT),
    "lstm": AgentConfig(core="lstm", rnn_size=8, rnn_layers=2, head_init="torch", **TINY_AGENT),
    "delta": AgentConfig(core="delta", hidden=16, num_heads=2, head_dim=8, ff=16, num_layers=1, **TINY_AGENT),
    "none": AgentConfig(core="none", **TINY_AGENT),
}


def models(core: str, seed: int = 0):
    torch.manual_seed(seed)
    agent = freeze(build_agent(CORES[core]))
    return WorldModel(TINY.model, 15, agent.state_shapes()), agent


@pytest.mark.parametrize("core", list(CORES))
def test_any_core_trains_with_state_sizes_from_the_agent(core):
    wm, agent = models(core)
    width = sum(torch.Size(s).numel() for s in agent.state_shapes().values())
    assert wm.codec.width == width and (wm.to_agent is None) == (width == 0)
    batch = synthetic_batch(wm.config, wm.codec.width, 3)
    start, traj = teacher_forced(wm, agent, batch)
    assert traj.agent_state.shape == (TINY.model.num_sim_steps, 3, width)
    torch.testing.assert_close(start.bottleneck.norm(dim=-1), torch.ones(3))
    loss, metrics = world_model_loss(start, traj, batch, TINY.loss)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is None for p in agent.parameters())  # frozen agent
    missing = [n for n, p in wm.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert missing == []  # every part of the model is trained by some term
    assert (float(metrics["losses/agent_state"]) > 0) == (width > 0)


@pytest.mark.parametrize("core", ["gru", "none"])
def test_open_loop_with_the_agents_actions_equals_the_closed_loop(core):
    """The batched path (environment first, then decoder and agent on all frames) is the step-by-step one."""
    wm, agent = models(core)
    with torch.no_grad():
        bottleneck = random_bottlenecks(4, wm.config.bottleneck, torch.Generator().manual_seed(0))
        closed = dreamed(wm, agent, bottleneck, 5)
        start = wm.start(bottleneck, modal=True)
        actions = torch.cat([start.prev_action[None], closed.action[:-1]])
        opened = wm.simulate(agent, start, 5, actions=actions, modal=True)
    assert closed.per_step and not opened.per_step
    for name in ("frame", "env_h", "reward", "done_logit", "agent_state", "logits", "value", "action"):
        torch.testing.assert_close(
            getattr(opened, name), getattr(closed, name), atol=1e-5, rtol=1e-4, msg=name
        )


def test_value_gradient_reaches_the_bottleneck_through_the_environment():
    """d value(step k) / d bottleneck is non-zero; cutting the action path to the environment changes it."""
    wm, agent = models("gru")
    bottleneck = random_bottlenecks(2, wm.config.bottleneck, torch.Generator().manual_seed(1)).requires_grad_(
        True
    )

    def grad(env_grads: bool) -> torch.Tensor:
        traj = dreamed(wm, agent, bottleneck, 4, env_grads=env_grads)
        return torch.autograd.grad(traj.value[3].sum(), bottleneck)[0]

    with_env, without = grad(True), grad(False)
    assert with_env.abs().sum() > 0 and without.abs().sum() > 0
    assert not torch.allclose(with_env, without, rtol=1e-4, atol=0)
    assert grad(True).equal(with_env)  # deterministic: the difference is the cut path, not sampling
    # the exact per-step tensors of the closed loop take gradients (saliency)
    traj = dreamed(wm, agent, bottleneck, 4)
    frames = torch.autograd.grad(traj.value[3].sum(), traj.per_step["frame"], retain_graph=True)
    assert all(g.abs().sum() > 0 for g in frames[:4])
    later = torch.autograd.grad(traj.value[1].sum(), traj.per_step["agent_state"][2], materialize_grads=True)[
        0
    ]
    assert not later.any()  # the future does not cause the past


def test_a_scripted_agent_drives_the_environment():
    wm, _ = models("gru")
    right = ScriptedAgent(7, 15)
    with torch.no_grad():
        traj = dreamed(wm, right, random_bottlenecks(3, wm.config.bottleneck), 4, predicted_agent_state=False)
    assert traj.agent_state.shape[-1] == 0
    assert (traj.action.argmax(-1) == 7).all()
    with pytest.raises(ValueError, match="width"):  # the trained agent's predicted state does not fit it
        wm.simulate(right, wm.start(random_bottlenecks(1, wm.config.bottleneck)), 2)
