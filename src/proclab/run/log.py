"""What a run reports while it trains: metric rows, throughput, the progress bar.

Every trainer (PPO, IMPALA, the world model) writes its rows through :class:`RunLogger`
(``metrics.csv`` and TensorBoard via :class:`~proclab.io.run_dirs.MetricsLogger`, mirrored to
Weights & Biases when a project is named), measures speed with :class:`Throughput` and shows a
:class:`StepBar`, so runs of every kind look and resume alike.
"""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

from proclab.errors import ProclabError
from proclab.io.progress import progress_bar
from proclab.io.run_dirs import MetricsLogger


class RunLogger:
    """metrics.csv + TensorBoard, mirrored to Weights & Biases when ``wandb_project`` is set.

    ``resume_step`` cuts the existing log back to the checkpoint being resumed from.
    """

    def __init__(
        self,
        run_dir: Path,
        config: dict,
        *,
        tensorboard: bool = True,
        wandb_project: str | None = None,
        resume_step: int | None = None,
    ):
        self.metrics = MetricsLogger(run_dir, tensorboard, resume_step)
        self.wandb = _init_wandb(wandb_project, config, run_dir) if wandb_project else None

    @property
    def rows(self) -> list[dict]:
        """The rows logged so far (this process, after any resume cut)."""
        return self.metrics.rows

    def log(self, step: int, wall: float, row: dict[str, float]) -> None:
        self.metrics.log(step, wall, row)
        if self.wandb is not None:
            self.wandb.log(row, step=step)

    def close(self) -> None:
        self.metrics.close()


def _init_wandb(project: str, config: dict, run_dir: Path):
    try:
        # lazy: optional (proclab[wandb]), only --wandb-project needs it
        import wandb
    except ImportError:
        raise ProclabError("--wandb-project needs wandb: pip install 'proclab[wandb]'") from None
    return wandb.init(project=project, config=config, dir=str(run_dir), name=run_dir.name, resume="allow")


class Throughput:
    """Items (env steps, sequences) per second over the last ``window`` measured intervals."""

    def __init__(self, window: int = 10):
        self.intervals: deque[tuple[float, int]] = deque(maxlen=window)

    def add(self, seconds: float, steps: int) -> None:
        self.intervals.append((seconds, steps))

    def sps(self) -> float:
        """NaN (not logged) before the first interval."""
        secs = sum(t for t, _ in self.intervals)
        return sum(n for _, n in self.intervals) / max(secs, 1e-9) if self.intervals else math.nan


class StepBar:
    """A rich progress bar over a run's steps (or updates) with a short note (recent return, loss)."""

    def __init__(self, label: str, total: int, start: int, enabled: bool = True):
        self.bar = progress_bar(
            TextColumn(f"[bold]{label}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"),
            TimeRemainingColumn(),
            disable=not enabled,
        )
        self.task = self.bar.add_task(label, total=total, completed=start, note="")
        self.bar.start()

    def update(self, completed: int, note: str | None = None) -> None:
        if note is None:
            self.bar.update(self.task, completed=completed)
        else:
            self.bar.update(self.task, completed=completed, note=note)

    def close(self) -> None:
        self.bar.stop()
