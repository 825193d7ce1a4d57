"""Run directories and metric logs.

A run lives in ``RUN_ROOT/<algo>/<game>/<name>/<seed>-<timestamp>/``::

    config.json     the resolved configuration (rebuilds the run; read by --resume)
    config_history.jsonl   one line per change made on --resume (e.g. more --total-steps)
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
import re
import time
from pathlib import Path
from typing import Any

from proclab.errors import ProclabError
from proclab.io.files import disk_errors, read_json, replacing, write_json

CONFIG, METRICS, HISTORY = "config.json", "metrics.csv", "config_history.jsonl"
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
    with disk_errors(path, "run directory"):
        (path / "checkpoints").mkdir(parents=True)
        (path / "videos").mkdir()
    write_json_atomic(path / CONFIG, config)
    return path


def read_run_config(run_dir: str | Path) -> dict:
    path = Path(run_dir) / CONFIG
    if not path.is_file():
        raise ProclabError(f"{str(run_dir)!r} is not a run directory (no {CONFIG})")
    config = read_json(path, "run config")
    if not isinstance(config, dict):
        raise ProclabError(f"run config {str(path)!r} is corrupt (not a JSON object)")
    return config


def record_config_change(
    run_dir: Path, config: dict, changed: dict[str, tuple[Any, Any]], step: int, at: str = "resumed_at_step"
) -> None:
    """Make ``config`` the run's ``config.json`` and append what changed, and at which ``step`` (the
    checkpoint a ``--resume`` started from, or ``at`` another event), to ``config_history.jsonl`` (so a
    run's result says how it was trained)."""
    entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), at: step, "changed": changed}
    path = Path(run_dir) / HISTORY
    with disk_errors(path, "config history"), open(path, "a") as f:
        f.write(json.dumps(entry, default=str) + "\n")
    write_json_atomic(Path(run_dir) / CONFIG, config)


def write_json_atomic(path: Path, data: Any) -> None:
    """``data`` as indented JSON at ``path``, written whole or not at all."""
    write_json(path, data, f"{Path(path).name}")


def _read_rows(path: Path) -> tuple[list[str], list[dict[str, str]], list[dict[str, float]]]:
    """The columns of a metrics CSV and its rows written in full, as text and as floats (NaN where
    blank). A write cut short (a full disk, a kill) leaves a shorter last row; it is dropped."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            columns = list(reader.fieldnames or [])
            text = [r for r in reader if None not in r.values() and None not in r]
        values = [{k: float(v) if v != "" else math.nan for k, v in r.items()} for r in text]
    except (OSError, UnicodeDecodeError, ValueError, csv.Error) as err:
        raise ProclabError(f"metrics {str(path)!r} are corrupt ({err})") from None
    return columns, text, values


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
            columns, text, values = _read_rows(self.path)
            self.columns = columns or self.columns
            self.rows = [r for r, v in zip(text, values, strict=True) if v["step"] <= resume_step]
            self._rewrite()
        elif self.path.exists():
            self.path.unlink()
        self.writer = None
        if tensorboard:
            # lazy: TensorBoard's writer is slow to import, only --tensorboard runs need it
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(run_dir), purge_step=resume_step)

    def _rewrite(self) -> None:
        with replacing(self.path, "metrics") as tmp, open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.columns, restval="")
            writer.writeheader()
            writer.writerows(self.rows)

    def log(self, step: int, wall_time: float, metrics: dict[str, float]) -> None:
        row = {"step": int(step), "wall_time": round(float(wall_time), 3)}
        row.update({k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(float(v))})
        new = [k for k in row if k not in self.columns]
        self.rows.append(row)
        if new or not self.path.exists():
            self.columns.extend(new)
            self._rewrite()
        else:
            with disk_errors(self.path, "metrics"), open(self.path, "a", newline="") as f:
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
    columns, _, rows = _read_rows(path)
    return {k: [row[k] for row in rows] for k in columns}
