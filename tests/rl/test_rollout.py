"""The actor's previous-reward input across episode boundaries, per the agent's config; acting side by side; the
env given to an agent that acts from the game state."""

import dataclasses

import numpy as np
import pytest
import torch

from proclab.envs import ProcgenVecEnv
from proclab.models import AgentConfig, build_agent
from proclab.models.scripted import ScriptedAgent
from proclab.rl.config import EnvConfig
from proclab.rl.rollout import Actor, Rollout
from proclab.run.runtime import make_runtime
from support import TINY_AGENT


class _CountingEnv:
    """Slot i's episodes last lengths[i] steps; step t of an episode pays t + 1 + 10 i, the last one too."""

    def __init__(self, lengths):
        self.lengths = np.asarray(lengths)
        self.num_envs = len(lengths)
        self.t = np.zeros(self.num_envs, np.int64)

    def reset(self):
        return np.zeros((self.num_envs, 3, 64, 64), np.uint8), {}

    def step(self, actions):
        self.t += 1
        reward = (self.t + 10 * np.arange(self.num_envs)).astype(np.float32)
        done = self.t == self.lengths
        self.t[done] = 0
        return self.reset()[0], reward, done, np.zeros(self.num_envs, bool), {}


@pytest.mark.parametrize("reset", [True, False])
def test_previous_reward_on_a_first_frame_follows_the_agent_config(reset):
    """prev_reward_reset: 0 on an episode's first frame; off (modern-srwm's actors): the finished
    episode's last reward, which is never 0 here."""
    rt = make_runtime("cpu", "fp32")
    agent = build_agent(AgentConfig(prev_reward=True, prev_reward_reset=reset, **TINY_AGENT))
    actor = Actor(_CountingEnv([3, 4]), agent, rt)
    ro = Rollout.allocate(10, 2, rt.device)
    actor.collect(ro)
    assert ro.firsts[1:].any()
    for t in range(1, 10):
        for i in range(2):
            earned = float(ro.rewards[t - 1, i])  # what a_{t-1} earned, delivered with obs_t
            expected = 0.0 if (reset and ro.firsts[t, i]) else earned
            assert float(ro.prev_rewards[t, i]) == expected, (t, i)
    assert torch.equal(ro.firsts[1:], ro.dones[:-1])


@pytest.mark.parametrize("core", ["none", "gru"])
def test_side_by_side_acting_fills_the_same_rollout(core):
    """Acting on slices of the envs in the runtime's acting workers gives the whole batch's outputs and
    states: the same actions, and log-probabilities, values and carried states equal within
    float rounding (the slices are other batch sizes, computed in other threads)."""
    rt = dataclasses.replace(make_runtime("cpu", "fp32"), acting_workers=2)
    rollouts, states = [], []
    for side_by_side in (False, True):
        torch.manual_seed(0)
        agent = build_agent(AgentConfig(core=core, rnn_size=16, **TINY_AGENT))
        env = ProcgenVecEnv(EnvConfig(game=("dodgeball",), num_envs=5), seed=0)
        actor = Actor(env, agent, rt, side_by_side=side_by_side)
        assert len(actor.slices) == (2 if side_by_side else 0)
        ro = Rollout.allocate(12, 5, rt.device)
        actor.collect(ro)
        rollouts.append(ro)
        states.append(actor.state)
    whole, split = rollouts
    assert torch.equal(whole.actions, split.actions)
    assert torch.equal(whole.dones, split.dones)
    torch.testing.assert_close(split.logprobs, whole.logprobs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(split.values, whole.values, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(split.next_value, whole.next_value, atol=1e-5, rtol=1e-5)
    for key, value in states[0].items():
        torch.testing.assert_close(states[1][key], value, atol=1e-5, rtol=1e-5)


def test_an_agent_that_watches_is_given_the_env_its_actor_plays():
    """A policy that acts from the game state (``watch(env)``) reads the slots' states from the env it is
    given; an agent without the hook is played as before."""

    class Watcher(ScriptedAgent):
        def watch(self, env):
            self.env = env

    env, agent = _CountingEnv([3, 5]), Watcher(None)
    Actor(env, agent, make_runtime("cpu", "fp32"))
    assert agent.env is env
    Actor(_CountingEnv([3, 5]), ScriptedAgent(None), make_runtime("cpu", "fp32"))
