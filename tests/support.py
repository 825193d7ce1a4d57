"""Helpers shared by the tests: tiny agents, rollouts, CLI runs."""

import torch

from proclab.config import PPOConfig
from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.models import AgentConfig, build_agent
from proclab.rl.ppo import PPOLearner
from proclab.rl.rollout import Actor, Rollout

TINY_AGENT = dict(widths=(4, 8, 8), fc=32)
TINY_FLAGS = ["--widths", "4", "8", "8", "--fc", "32", "--torch-threads", "1"]


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
