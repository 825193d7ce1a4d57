"""Run directories and metric logs.

A run lives in ``RUN_ROOT/<algo>/<game>/<name>/<seed>-<timestamp>/``::

    config.json     the resolved configuration (rebuilds the run; read by --resume)
    metrics.csv     one row per logged update (CleanRL metric names, e.g. charts/SPS)
    events.out...   TensorBoard event files (same scalars)
    checkpoints/    step_<N>/ checkpoint directories (see proclab.io.checkpoint)
    videos/

Re-opening the directory resumes it: the metric log is cut back to the checkpoint being
resumed from, so a run killed between two checkpoints logs each step exactly once.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import time
from pathlib import Path
from typing import Any

from proclab.errors import ProclabError

CONFIG, METRICS = "config.json", "metrics.csv"
_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def _slug(text: str) -> str:
    slug = _SAFE.sub("-", str(text)).strip("-.")
    return slug or "run"


def game_label(games: tuple[str, ...]) -> str:
    """A run directory's game level: the game, up to three joined by ``+``, or ``<N>games``."""
    return games[0] if len(games) == 1 else (("+".join(games)) if len(games) <= 3 else f"{len(games)}games")


def create_run_dir(root: str | Path, algo: str, game: str, name: str, seed: int, config: dict) -> Path:
    """A new, unique run directory holding ``config.json``."""
    base = Path(root) / _slug(algo) / _slug(game) / _slug(name)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = base / f"{seed}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = base / f"{seed}-{stamp}-{n}"
    (path / "checkpoints").mkdir(parents=True)
    (path / "videos").mkdir()
    write_json_atomic(path / CONFIG, config)
    return path


def read_run_config(run_dir: str | Path) -> dict:
    path = Path(run_dir) / CONFIG
    if not path.is_file():
        raise ProclabError(f"{str(run_dir)!r} is not a run directory (no {CONFIG})")
    try:
        return json.loads(path.read_text())
    except ValueError as err:
        raise ProclabError(f"{str(path)!r} is not valid JSON: {err}") from None


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    tmp.replace(path)


class MetricsLogger:
    """Append-only CSV (plus TensorBoard) of scalar metrics keyed by env step.

    Columns are ``step, wall_time`` then metrics in order of first appearance; a metric that
    appears later (e.g. the first finished episode) widens the file once.
    """

    def __init__(self, run_dir: str | Path, tensorboard: bool = True, resume_step: int | None = None):
        self.path = Path(run_dir) / METRICS
        self.columns: list[str] = ["step", "wall_time"]
        self.rows: list[dict[str, Any]] = []
        if self.path.exists() and resume_step is not None:
            with open(self.path, newline="") as f:
                reader = csv.DictReader(f)
                self.columns = list(reader.fieldnames or self.columns)
                self.rows = [r for r in reader if int(float(r["step"])) <= resume_step]
            self._rewrite()
        elif self.path.exists():
            self.path.unlink()
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(run_dir), purge_step=resume_step)

    def _rewrite(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.columns, restval="")
            writer.writeheader()
            writer.writerows(self.rows)
        tmp.replace(self.path)

    def log(self, step: int, wall_time: float, metrics: dict[str, float]) -> None:
        row = {"step": int(step), "wall_time": round(float(wall_time), 3)}
        row.update({k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(float(v))})
        new = [k for k in row if k not in self.columns]
        self.rows.append(row)
        if new or not self.path.exists():
            self.columns.extend(new)
            self._rewrite()
        else:
            with open(self.path, "a", newline="") as f:
                csv.DictWriter(f, fieldnames=self.columns, restval="").writerow(row)
        if self.writer is not None:
            for k, v in row.items():
                if k not in ("step", "wall_time"):
                    self.writer.add_scalar(k, v, step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def read_metrics(path: str | Path) -> dict[str, list[float]]:
    """A metrics.csv (or the run directory holding it) as columns of floats (NaN where blank)."""
    path = Path(path)
    if path.is_dir():
        path = path / METRICS
    if not path.is_file():
        raise ProclabError(f"no metrics at {str(path)!r}; is this a proclab run directory?")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        cols: dict[str, list[float]] = {k: [] for k in reader.fieldnames or []}
        for row in reader:
            for k in cols:
                v = row.get(k, "")
                cols[k].append(float(v) if v not in ("", None) else math.nan)
    return cols
