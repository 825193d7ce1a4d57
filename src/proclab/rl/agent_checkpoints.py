"""An agent's training run, for both algorithms: its run directory, checkpoints and progress note.

PPO and IMPALA write the same files (the agent's weights with the configs that rebuild it, and
their training state), so ``proclab eval`` / ``render`` / ``record`` and ``--resume`` read
every run the same way.
"""

from __future__ import annotations

from pathlib import Path

import torch

from proclab.envs import EpisodeLog
from proclab.io.checkpoint import find_checkpoint, load_checkpoint, load_weights_into, save_checkpoint
from proclab.io.configs import to_dict
from proclab.io.run_dirs import create_run_dir, game_label
from proclab.rl.config import TrainConfig
from proclab.run.checkpoints import prune_checkpoints


def new_run_dir(config: TrainConfig) -> Path:
    """``RUN_ROOT/ALGO/GAME/NAME/SEED-TIMESTAMP`` holding the resolved config."""
    label = game_label(config.env.games())
    return create_run_dir(config.run_root, config.algo, label, config.name, config.seed, to_dict(config))


def save_agent_checkpoint(
    run_dir: Path,
    agent: torch.nn.Module,
    config: TrainConfig,
    games: tuple[str, ...],
    step: int,
    state: dict,
    meta: dict | None = None,
) -> Path:
    """``run_dir/checkpoints/step_<N>``: weights, the configs that rebuild the agent, training state.

    ``meta`` adds facts for the checkpoint's readers (e.g. PPO's reward normalisation). Keeps only
    the newest ``config.keep_checkpoints`` (0 = all).
    """
    full = {
        "kind": "agent",
        "algo": config.algo,
        "step": step,
        "games": list(games),
        "agent": to_dict(config.agent),
        "env": to_dict(config.env),
        "train": to_dict(config),
        **(meta or {}),
    }
    path = save_checkpoint(run_dir / "checkpoints" / f"step_{step:012d}", agent.state_dict(), full, state)
    prune_checkpoints(run_dir / "checkpoints", config.keep_checkpoints)
    return path


def load_agent_checkpoint(run_dir: Path, agent: torch.nn.Module) -> dict:
    """Load the run's latest checkpoint into ``agent``; returns its training state.

    A checkpoint of another architecture (e.g. another core) is a one-line error naming the
    mismatched keys.
    """
    path = find_checkpoint(run_dir)
    ckpt = load_checkpoint(path, kind="agent", train_state=True)
    load_weights_into(agent, ckpt.weights, path)
    return ckpt.train_state


def recent_return(log: EpisodeLog) -> str | None:
    """The progress bar's note: the mean return of the recent training episodes."""
    ret = log.summary().get("return_mean")
    return None if ret is None else f"return {ret:.2f}"
