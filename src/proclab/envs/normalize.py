"""Reward normalisation: divide rewards by the running std of the discounted return.

This is the Procgen-paper / baselines ``VecNormalize(ob=False)`` scheme: each env keeps a
discounted return ``G <- gamma * G + r`` (reset to 0 when its episode ends); the running
variance of ``G`` over all envs and steps scales the reward, which is then clipped to
``[-clip, clip]``. The raw reward is kept in ``info["raw_reward"]``.

``gamma`` defaults to the training discount. The seeds normalised with gamma=0.99 while
training with gamma=0.999, a mismatch proclab does not reproduce (pass ``gamma`` to do so).
"""

from __future__ import annotations

import numpy as np


class RunningMeanStd:
    """Mean and variance of a stream of batches (Chan et al.'s parallel update)."""

    def __init__(self, epsilon: float = 1e-4):
        self.mean = 0.0
        self.var = 1.0
        self.count = epsilon

    def update(self, batch: np.ndarray) -> None:
        batch = np.asarray(batch, np.float64)
        b_mean, b_var, b_count = batch.mean(), batch.var(), batch.size
        delta = b_mean - self.mean
        total = self.count + b_count
        self.mean = self.mean + delta * b_count / total
        m2 = self.var * self.count + b_var * b_count + delta**2 * self.count * b_count / total
        self.var = m2 / total
        self.count = total

    def state_dict(self) -> dict:
        return {"mean": float(self.mean), "var": float(self.var), "count": float(self.count)}

    def load_state_dict(self, state: dict) -> None:
        self.mean, self.var, self.count = float(state["mean"]), float(state["var"]), float(state["count"])


class RewardNormalizer:
    """Wraps a vector env; ``step`` returns normalised rewards, raw ones in ``info["raw_reward"]``."""

    def __init__(self, env, gamma: float, clip: float = 10.0, epsilon: float = 1e-8):
        self.env = env
        self.gamma = gamma
        self.clip = clip
        self.epsilon = epsilon
        self.return_rms = RunningMeanStd()
        self.returns = np.zeros(env.num_envs, np.float64)

    def __getattr__(self, name):  # delegate everything else (num_envs, games, close, ...)
        return getattr(self.env, name)

    def reset(self):
        self.returns[:] = 0
        return self.env.reset()

    def normalize(self, reward: np.ndarray, done: np.ndarray) -> np.ndarray:
        """Update the statistics with one step of rewards and return them normalised."""
        self.returns = self.returns * self.gamma + reward
        self.return_rms.update(self.returns)
        scaled = reward / self.scale()
        self.returns[done] = 0.0
        return np.clip(scaled, -self.clip, self.clip).astype(np.float32)

    def scale(self) -> float:
        """What rewards are divided by now: the running std of the discounted return."""
        return float(np.sqrt(self.return_rms.var + self.epsilon))

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        info["raw_reward"] = reward
        return obs, self.normalize(reward, terminated | truncated), terminated, truncated, info

    def get_state(self) -> dict:
        return {
            **self.env.get_state(),
            "reward_rms": self.return_rms.state_dict(),
            "reward_returns": self.returns.copy(),
        }

    def set_state(self, state: dict):
        self.return_rms.load_state_dict(state["reward_rms"])
        self.returns = np.array(state["reward_returns"], np.float64)
        return self.env.set_state(state)
