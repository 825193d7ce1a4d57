"""A vector env whose reward is a learned one: the reward of step t is r̂(obs_t).

T-REX learns r̂ on the frames *before* each action (a demo's ``obs[t]`` with ``reward[t]``), so
the policy must be paid r̂(obs_t) for the action it took from obs_t. The wrapper keeps the
observation it last returned, which is exactly what the actor fed to the agent, and scores
it when the action comes back. The seed's wrapper scored the observation returned *after* the
step instead: a one-step offset and, at episode ends, the first frame of the next level (Procgen
resets inside the step), so the last action of every episode was paid for a frame of another
level. Here the first frame of a new episode is scored when the agent acts from it.

Put it below reward normalisation (the normaliser then scales r̂, as ``VecNormalize`` did in
the seed). ``info["true_reward"]`` keeps the env's reward; the env's ``info["episode"]`` still
reports true returns, and ``info["proxy_episode"]`` the same episodes with their r̂ returns.
"""

from __future__ import annotations

import numpy as np
import torch


class PerStepReward(torch.nn.Module):
    """+1 for every frame: the +1/step baseline as a reward, the policy control for a learned reward that
    is mostly "survive longer" (``proclab train --reward-model per-step``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ones(x.shape[0], device=x.device)


class LearnedRewardEnv:
    """Wraps a vector env (:class:`~proclab.envs.ProcgenVecEnv` interface); rewards become ``net(obs_t)``."""

    def __init__(self, env, net: torch.nn.Module, runtime, sigmoid: bool = False):
        self.env, self.net, self.rt, self.sigmoid = env, net, runtime, sigmoid
        self.obs: np.ndarray | None = None
        self.proxy_return = np.zeros(env.num_envs, np.float64)

    def __getattr__(self, name):  # num_envs, games, game_index, close, ...
        return getattr(self.env, name)

    @torch.inference_mode()
    def learned_reward(self, obs: np.ndarray) -> np.ndarray:
        with self.rt.autocast():
            r = self.net(self.rt.obs_tensor(obs)).float()
        return (torch.sigmoid(r) if self.sigmoid else r).cpu().numpy()

    def reset(self):
        self.obs, info = self.env.reset()
        self.proxy_return[:] = 0
        return self.obs, info

    def step(self, actions):
        reward = self.learned_reward(self.obs)  # r̂(obs_t): the frame the actions were chosen from
        self.obs, true_reward, terminated, truncated, info = self.env.step(actions)
        done = terminated | truncated
        self.proxy_return += reward
        info["true_reward"] = true_reward
        info["proxy_episode"] = {**info["episode"], "return": np.where(done, self.proxy_return, 0.0)}
        self.proxy_return[done] = 0
        return self.obs, reward, terminated, truncated, info

    def get_state(self) -> dict:
        return {**self.env.get_state(), "proxy_return": self.proxy_return.copy()}

    def set_state(self, state: dict):
        self.proxy_return = np.array(state["proxy_return"], np.float64)
        self.obs, info = self.env.set_state(state)
        return self.obs, info
