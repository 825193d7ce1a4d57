"""The parts of a training loop that do not depend on the algorithm (PPO, IMPALA).

A run directory and its metric log (CSV, TensorBoard, optional W&B), the metric row built from
the per-game episode logs, checkpoints of the agent with the run's configs, the checkpoint
cadence, throughput over a recent window, and the progress bar. Each trainer composes them
with its own learner and actors, so both algorithms write the same files with the same
metric names and ``proclab eval`` / ``plot`` / ``--resume`` read them the same way.
"""

from __future__ import annotations

import math
import shutil
from collections import deque
from pathlib import Path

import torch

from proclab.config import TrainConfig, to_dict
from proclab.envs import EpisodeLog
from proclab.errors import ProclabError
from proclab.io.checkpoint import find_checkpoint, load_checkpoint, load_weights_into, save_checkpoint
from proclab.io.runs import MetricsLogger, create_run_dir


def game_label(games: tuple[str, ...]) -> str:
    return games[0] if len(games) == 1 else (("+".join(games)) if len(games) <= 3 else f"{len(games)}games")


def new_run_dir(config: TrainConfig) -> Path:
    """``RUN_ROOT/ALGO/GAME/NAME/SEED-TIMESTAMP`` holding the resolved config."""
    label = game_label(config.env.games())
    return create_run_dir(config.run_root, config.algo, label, config.name, config.seed, to_dict(config))


class RunLogger:
    """metrics.csv + TensorBoard, mirrored to Weights & Biases when the config names a project."""

    def __init__(self, run_dir: Path, config: TrainConfig, resume_step: int | None = None):
        self.metrics = MetricsLogger(run_dir, config.tensorboard, resume_step)
        self.wandb = _init_wandb(config, run_dir) if config.wandb_project else None

    def log(self, step: int, wall: float, row: dict[str, float]) -> None:
        self.metrics.log(step, wall, row)
        if self.wandb is not None:
            self.wandb.log(row, step=step)

    def close(self) -> None:
        self.metrics.close()


def _init_wandb(config: TrainConfig, run_dir: Path):
    try:
        import wandb
    except ImportError:
        raise ProclabError("--wandb-project needs wandb: pip install 'proclab[wandb]'") from None
    return wandb.init(project=config.wandb_project, config=to_dict(config), dir=str(run_dir),
                      name=run_dir.name, resume="allow")  # fmt: skip


def episode_metrics(train_log: EpisodeLog, val_log: EpisodeLog) -> dict[str, float]:
    """``charts/[<game>/][val_]episodic_return`` etc. from the training and validation episode logs."""
    row = {}
    for prefix, log in (("", train_log), ("val_", val_log)):
        for key, value in log.summary().items():
            game, _, stat = key.rpartition("/")
            name = {"return_mean": "episodic_return", "length_mean": "episodic_length"}.get(stat, stat)
            row[f"charts/{game + '/' if game else ''}{prefix}{name}"] = value
    return row


class Throughput:
    """Env steps per second over the last ``window`` measured intervals."""

    def __init__(self, window: int = 10):
        self.intervals: deque[tuple[float, int]] = deque(maxlen=window)

    def add(self, seconds: float, steps: int) -> None:
        self.intervals.append((seconds, steps))

    def sps(self) -> float:
        """NaN (not logged) before the first interval."""
        secs = sum(t for t, _ in self.intervals)
        return sum(n for _, n in self.intervals) / max(secs, 1e-9) if self.intervals else math.nan


def crossed(previous_step: int, step: int, every: int) -> bool:
    """True when a multiple of ``every`` lies in ``(previous_step, step]`` (time for a checkpoint)."""
    return step // every > previous_step // every


# -- checkpoints ---------------------------------------------------------------------------------
def save_agent_checkpoint(
    run_dir: Path, agent: torch.nn.Module, config: TrainConfig, games: tuple[str, ...], step: int, state: dict
) -> Path:
    """``run_dir/checkpoints/step_<N>``: weights, the configs that rebuild the agent, training state.

    Keeps only the newest ``config.keep_checkpoints`` (0 = all).
    """
    meta = {
        "kind": "agent",
        "algo": config.algo,
        "step": step,
        "games": list(games),
        "agent": to_dict(config.agent),
        "env": to_dict(config.env),
        "train": to_dict(config),
    }
    path = save_checkpoint(run_dir / "checkpoints" / f"step_{step:012d}", agent.state_dict(), meta, state)
    if config.keep_checkpoints > 0:
        found = sorted((run_dir / "checkpoints").glob("step_*"))
        for old in found[: -config.keep_checkpoints]:
            shutil.rmtree(old, ignore_errors=True)
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


def log_state(log: EpisodeLog) -> dict:
    return {
        "returns": {g: list(d) for g, d in log.returns.items()},
        "lengths": {g: list(d) for g, d in log.lengths.items()},
        "completed": {g: list(d) for g, d in log.completed.items()},
        "total": log.total,
    }


def load_log_state(log: EpisodeLog, state: dict) -> None:
    for name in ("returns", "lengths", "completed"):
        for g, values in state[name].items():
            getattr(log, name)[g].extend(values)
    log.total = state["total"]


# -- progress ------------------------------------------------------------------------------------
class StepBar:
    """A rich progress bar over env steps with the recent training return."""

    def __init__(self, total: int, start: int):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[ret]}"), TimeRemainingColumn())  # fmt: skip
        self.task = self.bar.add_task("train", total=total, completed=start, ret="")
        self.bar.start()

    def update(self, step: int, ret: float | None) -> None:
        self.bar.update(self.task, completed=step, ret="" if ret is None else f"return {ret:.2f}")

    def close(self) -> None:
        self.bar.stop()


def progress_bar(enabled: bool, total: int, start: int) -> StepBar | None:
    return StepBar(total, start) if enabled else None
