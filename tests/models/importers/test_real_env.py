"""``proclab eval --greedy`` of an imported agent takes the actions its source would take, step
for step, in a real Procgen environment: eval's own loop plays 200 steps in 4 environments
while the frames, episode starts and rewards it sees are recorded, and the slow reference
re-plays them (its previous-reward input built by the source's rule) and must pick every action."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from foreign_agents import TorchbeastRef
from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.io.checkpoint import load_checkpoint
from proclab.io.configs import from_dict
from proclab.rl.evaluate import evaluate_env
from proclab.run.runtime import Runtime

CPU = Runtime(device=torch.device("cpu"), bf16=False, channels_last=False)

STEPS, ENVS = 200, 4


class _Enough(Exception):
    pass


class RecordingEnv:
    """A ProcgenVecEnv that keeps what the agent saw and did, and stops eval after ``STEPS``."""

    def __init__(self, env: ProcgenVecEnv):
        self.env, self.games, self.game_index, self.num_envs = env, env.games, env.game_index, env.num_envs
        self.frames, self.actions, self.rewards, self.dones = [], [], [], []

    def reset(self):
        obs, info = self.env.reset()
        self.frames.append(obs.copy())
        return obs, info

    def step(self, action):
        if len(self.actions) == STEPS:
            raise _Enough
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.actions.append(action.copy())
        self.rewards.append(np.asarray(info.get("raw_reward", reward), np.float32).copy())
        self.dones.append(terminated | truncated)
        self.frames.append(obs.copy())
        return obs, reward, terminated, truncated, info


def _reference_actions(ref, rec: RecordingEnv) -> tuple[np.ndarray, float]:
    """The reference's greedy actions on the recorded frames; also its smallest top-2 logit gap."""
    state, first = ref.initial_state(ENVS), torch.ones(ENVS, dtype=torch.bool)
    prev = torch.zeros(ENVS)
    actions, gap = [], np.inf
    for t in range(STEPS):
        logits, _, state = ref.step(torch.from_numpy(rec.frames[t]), state, first, prev)
        top2 = logits.topk(2, dim=1).values
        gap = min(gap, (top2[:, 0] - top2[:, 1]).min().item())
        actions.append(logits.argmax(1).numpy())
        first = torch.from_numpy(rec.dones[t])
        # torchbeast feeds the last reward unmasked; the other sources do not read it
        prev = torch.from_numpy(rec.rewards[t]) if isinstance(ref, TorchbeastRef) else torch.zeros(ENVS)
    return np.stack(actions), gap


@pytest.mark.parametrize(
    "variant",
    [
        "train-procgen-gru", "cleanrl", "pufferlib-lstm", "torchbeast-srwm", "torchbeast-lstm",
        pytest.param("cleanba", marks=pytest.mark.slow),  # 17 s; its forward pass is checked in the default suite
    ],
)  # fmt: skip
def test_greedy_eval_takes_the_reference_actions(imported, variant):
    ref, agent, run = imported(variant)
    env_config = from_dict(EnvConfig, load_checkpoint(run, kind="agent").meta["env"])
    rec = RecordingEnv(ProcgenVecEnv(replace(env_config, num_envs=ENVS), seed=7))
    try:
        with pytest.raises(_Enough):
            evaluate_env(agent, rec, episodes=10_000, runtime=CPU, greedy=True)
    finally:
        rec.env.close()
    expected, gap = _reference_actions(ref, rec)
    played = np.stack(rec.actions)
    assert np.stack(rec.dones).any(), "no episode ended: the resets were not exercised"
    mismatches = np.argwhere(played != expected)
    assert mismatches.size == 0, (
        f"first differing (step, env): {mismatches[0].tolist()} (smallest top-2 gap {gap:.1e})"
    )
