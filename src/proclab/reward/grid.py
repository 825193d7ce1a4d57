"""The T-REX experiment grid, games x num-demos x seeds, into one CSV (``proclab trex grid``).

The seed ran its grid serially, one subprocess per cell, without passing the seed index on
(every cell drew its own random seed). Here cell ``(game, n, s)`` trains with seed
``--train.seed + s`` from the settings of ``--preset`` (``trex train``'s: batched, or parity, the
seed's), the cells run in parallel (local processes, or Ray tasks on a cluster
with ``--ray-address`` or ``RAY_ADDRESS``: :func:`proclab.run.tasks.run_tasks`, as a population's members and
a sweep's blocks), and each finished cell appends its summary row (the columns of
``trex train``'s summary) to ``--out`` at once, so an interrupted grid keeps what it finished.
Every cell is checked before any starts: a num-demos that a game's demos cannot supply is an
error up front, not a crash an hour in. Cells that already have a row in ``--out`` are skipped
(``--no-skip-done`` trains them again), so a grid stopped part-way is continued by running the
same command again.
"""

from __future__ import annotations

import csv
import itertools
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from proclab.errors import ProclabError
from proclab.io.files import disk_errors
from proclab.io.progress import progress_bar
from proclab.reward.demo_reader import demo_table, open_store
from proclab.reward.train import TrexConfig, append_summary, train_reward
from proclab.run.tasks import TaskSettings, run_tasks


@dataclass(frozen=True)
class GridSettings:
    """The grid's cells and how they run (``proclab trex grid``'s options of these names)."""

    train: TrexConfig  # every run's settings and runtime (the grid sets its game, num_demos and seed)
    games: tuple[str, ...] = ()  # games (default: every game in the demo store)
    num_demos: tuple[int, ...] = (12, 50, 100)  # numbers of training demos
    seeds: int = 5  # seeds per (game, num-demos) cell
    out: Path = Path("runs/trex/grid.csv")  # CSV of summary rows (appended to)
    skip_done: bool = True  # skip cells that already have a row in ``out``
    workers: int = 1  # runs at a time on this machine (1: one after another in this process)
    # run each cell as a Ray task on this cluster (default: $RAY_ADDRESS, else none)
    ray_address: str | None = None

    def tasks(self) -> TaskSettings:
        """Where the cells run (:func:`~proclab.run.tasks.run_tasks`): a Ray task reserves its torch threads."""
        return TaskSettings(self.workers, self.ray_address, cpus=max(1, self.train.torch_threads))


def grid_configs(settings: GridSettings) -> list[TrexConfig]:
    """One config per cell, after checking that every game has the demos the cell asks for."""
    if settings.seeds < 1 or not settings.num_demos:
        raise ProclabError("give at least one --num-demos and --seeds >= 1")
    store = open_store(settings.train.demos)
    games = settings.games or tuple(store.games)
    for game in games:
        _, table = demo_table(store, game, settings.train.mode)
        train = (table["split"] == "train") & (table["length"] > settings.train.min_clip_len)
        if max(settings.num_demos) > train.sum():
            raise ProclabError(
                f"--num-demos {max(settings.num_demos)} needs that many {game} training demos longer than "
                f"{settings.train.min_clip_len} steps; {str(settings.train.demos)!r} has {train.sum()}"
            )
        if len(np.unique(table["return"][train])) < 2:
            raise ProclabError(f"every {game} training demo has the same return: there is nothing to rank")
    base = replace(settings.train, torch_threads=threads(settings))
    done = finished_cells(settings.out) if settings.skip_done else set()
    # the seed's mode in directories of its own, so that "the newest run of row n" stays a batched one
    mode = "-parity" if settings.train.parity else ""
    return [
        replace(base, game=g, num_demos=n, seed=settings.train.seed + s, name=f"grid-n{n}{mode}")
        for g, n, s in itertools.product(games, settings.num_demos, range(settings.seeds))
        if (g, n, settings.train.seed + s) not in done
    ]


def threads(settings: GridSettings) -> int:
    """Torch threads per run: the runs' own, or with 0 the cores shared among the workers (a Ray task's 1)."""
    if settings.train.torch_threads or settings.tasks().address() is not None:
        return max(1, settings.train.torch_threads)
    return max(1, (os.cpu_count() or 1) // settings.workers) if settings.workers > 1 else 0


def finished_cells(out: Path) -> set[tuple[str, int, int]]:
    """``(game, num_dems, seed)`` of the rows already in the grid CSV ``out`` (none if it does not exist)."""
    if not out.is_file():
        return set()
    with disk_errors(out, "T-REX grid CSV"), open(out, newline="") as f:
        return {(r["env_name"], int(r["num_dems"]), int(r["seed"])) for r in csv.DictReader(f)}


def _quiet_run(cfg: TrexConfig) -> dict:
    return train_reward(cfg, progress=False)


def run_grid(settings: GridSettings) -> list[dict]:
    """Train every cell; rows are appended to ``settings.out`` as cells finish. Returns the rows."""
    configs = grid_configs(settings)
    rows = []
    with progress_bar() as bar:
        task = bar.add_task(f"trex grid ({len(configs)} runs)", total=len(configs))

        def done(row: dict) -> None:
            append_summary(settings.out, [row])
            rows.append(row)
            bar.advance(task)

        for _, result in run_tasks(_quiet_run, configs, settings.tasks()):
            done(result())
    return rows
