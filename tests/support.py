"""Helpers shared by the tests: tiny agents, checkpoints, rollouts."""

from pathlib import Path

import torch

from proclab.config import PPOConfig, TrainConfig
from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.models import AgentConfig, build_agent
from proclab.rl.ppo import PPOLearner
from proclab.rl.rollout import Actor, Rollout
from proclab.rl.runs import save_agent_checkpoint

TINY_AGENT = dict(widths=(4, 8, 8), fc=32)
TINY_FLAGS = ["--widths", "4", "8", "8", "--fc", "32", "--torch-threads", "1"]


def agent_checkpoint(run_dir: Path, agent: AgentConfig, env: EnvConfig, state: dict | None = None) -> Path:
    """A freshly initialised agent saved exactly as the trainers save theirs (seeded: same weights every time)."""
    torch.manual_seed(0)
    config = TrainConfig(env=env, agent=agent)
    return save_agent_checkpoint(run_dir, build_agent(agent), config, env.games(), 0, state)


def collected(
    core: str, runtime, num_envs=6, num_steps=24, seed=0, prev_reward=False, game="dodgeball", **ppo
):
    torch.manual_seed(seed)
    agent = runtime.prepare(
        build_agent(AgentConfig(core=core, rnn_size=16, prev_reward=prev_reward, **TINY_AGENT))
    )
    env = ProcgenVecEnv(EnvConfig(game=(game,), num_envs=num_envs), seed=seed)
    actor = Actor(env, agent, runtime)
    rollout = Rollout.allocate(num_steps, num_envs, runtime.device)
    actor.collect(rollout)  # twice, so the second rollout starts mid-episode with a carried state
    actor.collect(rollout)
    learner = PPOLearner(agent, PPOConfig(num_steps=num_steps, **ppo), runtime, total_updates=10)
    return agent, rollout, learner
