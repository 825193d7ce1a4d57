"""A video of what the agent sees, with its action, value and reward drawn on (``proclab render``).

The agent's 64x64 observation is upscaled (nearest neighbour, so pixels stay crisp) and
annotated with an arrow for the chosen action and a caption with the value estimate, the
reward just received and the episode return so far. ``--human`` puts procgen's 512x512
high-resolution view beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from proclab.envs import ACTION_NAMES, ProcgenVecEnv
from proclab.errors import ProclabError
from proclab.io.progress import progress_bar
from proclab.io.video import annotate, upscale, write_video
from proclab.models.loading import load_agent
from proclab.rl.rollout import Actor
from proclab.run.runtime import RuntimeConfig


@dataclass(frozen=True)
class RenderSettings:
    """What :func:`render` plays and how it draws it (``proclab render``'s options)."""

    episodes: int = 1  # episodes in the video (played one after the other)
    split: str | None = None  # level split to play (None: the training split)
    game: str | None = None  # game to play, for multi-task agents (None: the first game)
    greedy: bool = False  # take the most likely action instead of sampling
    human: bool = False  # show procgen's 512x512 high-resolution view beside the agent's view
    scale: int = 4  # upscaling of the 64x64 agent view (8 with ``human``, to match its height)
    fps: float = 15  # frames per second of the video
    max_steps: int = 3000  # stop after this many steps even if the episodes have not ended
    seed: int = 0  # seed of the level sequence and action sampling


def render(
    agent_path: Path, video: Path, settings: RenderSettings, runtime: RuntimeConfig
) -> tuple[Path, list[float]]:
    """The agent (a run or checkpoint directory) playing on ``runtime``, as an mp4 at ``video``; returns the video's
    path and the returns of the episodes that finished."""
    if settings.episodes < 1:
        raise ProclabError(f"--episodes must be >= 1, got {settings.episodes}")
    rt = runtime.runtime()
    torch.manual_seed(settings.seed)
    agent, env_config, _ = load_agent(agent_path, rt)
    games = env_config.games()
    game = settings.game or games[0]
    if game not in games:
        raise ProclabError(f"game {game!r} is not one the agent was trained on ({', '.join(games)})")
    env = ProcgenVecEnv(
        replace(env_config, game=(game,), num_envs=1),
        seed=settings.seed,
        split=settings.split,
        render_human=settings.human,
    )
    actor = Actor(env, agent, rt)
    human = actor.reset_info.get("human")
    scale = 8 if settings.human else settings.scale
    frames, returns, ret, reward = [], [], 0.0, 0.0
    with progress_bar(transient=True) as bar:
        task = bar.add_task("render", total=settings.episodes)
        for _ in range(settings.max_steps):
            obs = actor.obs[0].permute(1, 2, 0).cpu().numpy()
            out, action, _, state = actor.act(greedy=settings.greedy)
            a = int(action[0])
            caption = [f"{ACTION_NAMES[a]}  v={float(out.value[0]):.2f}", f"r={reward:.1f}  R={ret:.1f}"]
            frame = annotate(upscale(obs[None], scale)[0], a, caption)
            if human is not None:
                frame = np.concatenate([frame, human[0]], axis=1)
            frames.append(frame)
            reward_arr, done, info = actor.env_step(action, state)
            reward = float(info.get("raw_reward", reward_arr)[0])
            ret += reward
            human = info.get("human")
            if done[0]:
                returns.append(float(info["episode"]["return"][0]))
                ret = reward = 0.0
                bar.advance(task)
                if len(returns) == settings.episodes:
                    break
    env.close()
    return write_video(video, np.stack(frames), fps=settings.fps), returns
