"""The learned-reward env: step t pays r̂(obs_t), the frame the action was chosen from, also at episode ends."""

import numpy as np
import torch

from proclab.models import AgentConfig, build_agent
from proclab.reward.wrapper import LearnedRewardEnv
from proclab.rl.rollout import Actor, Rollout
from proclab.run.runtime import make_runtime
from support import TINY_AGENT


class ScriptedEnv:
    """Env i's episodes last ``lengths[i]`` steps. Frames carry (channel 0) a running frame number and
    (channel 1) the episode number; the frame returned with ``done`` is the next episode's first,
    as in Procgen. The true reward is -1 on every step."""

    def __init__(self, lengths=(3, 5, 4)):
        self.lengths = np.array(lengths)
        self.num_envs = len(lengths)
        self.games, self.game_index = ("bigfish",), np.zeros(self.num_envs, np.int64)

    def _obs(self):
        obs = np.zeros((self.num_envs, 3, 64, 64), np.uint8)
        obs[:, 0] = (self.frame % 250)[:, None, None]
        obs[:, 1] = self.episode[:, None, None]
        return obs

    def reset(self):
        self.frame = np.arange(self.num_envs) * 50
        self.t, self.episode = np.zeros(self.num_envs, int), np.zeros(self.num_envs, int)
        return self._obs(), {}

    def step(self, actions):
        self.t += 1
        self.frame += 1
        done = self.t == self.lengths
        self.episode[done] += 1
        self.t[done] = 0
        info = {
            "episode": {
                "done": done,
                "return": np.where(done, -self.lengths, 0.0),
                "length": np.where(done, self.lengths, 0),
                "level_complete": done,
            }
        }
        return self._obs(), -np.ones(self.num_envs, np.float32), done, np.zeros_like(done), info


def frame_number(obs):
    return torch.as_tensor(obs)[:, 0, 0, 0].float()


def test_reward_of_step_t_is_learned_reward_of_obs_t():
    env = LearnedRewardEnv(ScriptedEnv(), frame_number, make_runtime("cpu", "fp32"))
    obs, _ = env.reset()
    proxy_returns, ends = {i: 0.0 for i in range(3)}, 0
    for _ in range(13):
        acted_from = obs
        obs, reward, done, _, info = env.step(np.zeros(3, int))
        np.testing.assert_array_equal(reward, acted_from[:, 0, 0, 0])  # r̂(obs_t), not r̂(obs_{t+1})
        np.testing.assert_array_equal(info["true_reward"], -1)
        for i in range(3):
            proxy_returns[i] += reward[i]
            if done[i]:  # the last action was paid for the last frame of its own episode, not the next one's
                assert acted_from[i, 1, 0, 0] == obs[i, 1, 0, 0] - 1
                assert info["proxy_episode"]["return"][i] == proxy_returns[i]
                assert info["episode"]["return"][i] == -env.lengths[i]  # true return untouched
                proxy_returns[i], ends = 0.0, ends + 1
            else:
                assert info["proxy_episode"]["return"][i] == 0
    assert ends >= 6


def test_rollout_rewards_align_with_rollout_observations():
    """Through the actor: rollout.rewards[t] == r̂(rollout.obs[t]) for every step, resets included."""
    rt = make_runtime("cpu", "fp32")
    agent = rt.prepare(build_agent(AgentConfig(**TINY_AGENT)))
    actor = Actor(LearnedRewardEnv(ScriptedEnv(), frame_number, rt), agent, rt)
    rollout = Rollout.allocate(11, 3, rt.device)
    for _ in range(2):  # the second rollout starts mid-episode
        actor.collect(rollout)
        expected = rollout.obs[:, :, 0, 0, 0].float()
        torch.testing.assert_close(rollout.rewards, expected)
        assert rollout.dones.any() and rollout.firsts[1:].any()
