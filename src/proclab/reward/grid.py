"""``proclab trex grid``: the T-REX experiment grid, games x num-demos x seeds, into one CSV.

The seed ran its grid serially, one subprocess per cell, without passing the seed index on
(every cell drew its own random seed). Here cell ``(game, n, s)`` trains with seed
``--train.seed + s`` from the settings of ``--preset`` (``trex train``'s: batched, or parity, the
seed's), the cells run in parallel (local processes, or Ray tasks on a cluster
with ``--ray-address``), and each finished cell appends its summary row (the columns of
``trex train``'s summary) to ``--out`` at once, so an interrupted grid keeps what it finished.
Every cell is checked before any starts: a num-demos that a game's demos cannot supply is an
error up front, not a crash an hour in. Cells that already have a row in ``--out`` are skipped
(``--no-skip-done`` trains them again), so a grid stopped part-way is continued by running the
same command again.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, fields, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro
from rich.progress import Progress

from proclab.errors import ProclabError
from proclab.io.arguments import DATA
from proclab.io.files import disk_errors
from proclab.reward.demo_reader import demo_table, open_store
from proclab.reward.train import TREX_PRESETS, TrexConfig, append_summary, train_reward, trex_preset
from proclab.run.distributed import connect_ray
from proclab.run.runtime import RuntimeConfig


@dataclass(frozen=True)
class GridArgs(RuntimeConfig):
    """Run the T-REX grid (games x num-demos x seeds) in parallel; every run's summary row goes to one CSV."""

    data: Annotated[Path, DATA] = Path("demos")
    """Demo store (train and test demos of every game in the grid)."""
    games: tuple[str, ...] = ()
    """Games (default: every game in the demo store)."""
    num_demos: tuple[int, ...] = (12, 50, 100)
    """Numbers of training demos (the published study: 9 ... 1000)."""
    seeds: int = 5
    """Seeds per (game, num-demos) cell: --train.seed, --train.seed + 1, ..."""
    out: Path = Path("runs/trex/grid.csv")
    """CSV of summary rows (appended to)."""
    skip_done: bool = True
    """Skip cells (game, num-demos, seed) that already have a row in --out: rerunning an interrupted grid
    continues it (the rows' other settings are not compared: use a new --out for new settings)."""
    workers: int = 1
    """Runs at a time on this machine (1: one after another in this process); with --torch-threads 0 each
    computes on cores / workers threads (a Ray task: 1)."""
    ray_address: str | None = None
    """Run each cell as a Ray task on this cluster (e.g. auto, or ray://HOST:10001) instead of local processes."""
    train: TrexConfig = field(default_factory=TrexConfig)
    """Settings of every run, from --preset; the grid sets their demo store, game, num-demos, seed and runtime
    (--data, --games, --num-demos, --train.seed + s, and --device, --precision, --channels-last,
    --torch-threads above)."""


SET_BY_GRID = {
    "--train.data": "--data",
    "--train.game": "--games",
    "--train.num-demos": "--num-demos",
    **{
        f"--train.{flag}": f"--{flag}"
        for flag in ("device", "precision", "channels-last", "no-channels-last", "torch-threads")
    },
}
"""``--train`` flags whose fields the grid sets for every run, and the grid's flag that sets them."""


def grid_configs(args: GridArgs) -> list[TrexConfig]:
    """One config per cell, after checking that every game has the demos the cell asks for."""
    if args.seeds < 1 or not args.num_demos:
        raise ProclabError("give at least one --num-demos and --seeds >= 1")
    store = open_store(args.data)
    games = args.games or tuple(store.games)
    for game in games:
        _, table = demo_table(store, game, args.train.mode)
        train = (table["split"] == "train") & (table["length"] > args.train.min_clip_len)
        if max(args.num_demos) > train.sum():
            raise ProclabError(
                f"--num-demos {max(args.num_demos)} needs that many {game} training demos longer than "
                f"{args.train.min_clip_len} steps; {str(args.data)!r} has {train.sum()}"
            )
        if len(np.unique(table["return"][train])) < 2:
            raise ProclabError(f"every {game} training demo has the same return: there is nothing to rank")
    base = replace(
        args.train,
        demos=args.data,
        device=args.device,
        precision=args.precision,
        channels_last=args.channels_last,
        torch_threads=threads(args),
    )
    done = finished_cells(args.out) if args.skip_done else set()
    # the seed's mode in directories of its own, so that "the newest run of row n" stays a batched one
    mode = "-parity" if args.train.parity else ""
    return [
        replace(base, game=g, num_demos=n, seed=args.train.seed + s, name=f"grid-n{n}{mode}")
        for g, n, s in itertools.product(games, args.num_demos, range(args.seeds))
        if (g, n, args.train.seed + s) not in done
    ]


def threads(args: GridArgs) -> int:
    """Torch threads per run: --torch-threads, or with 0 the cores shared among the workers (a Ray task's 1)."""
    if args.torch_threads or args.ray_address is not None:
        return max(1, args.torch_threads)
    return max(1, (os.cpu_count() or 1) // args.workers) if args.workers > 1 else 0


def finished_cells(out: Path) -> set[tuple[str, int, int]]:
    """``(game, num_dems, seed)`` of the rows already in the grid CSV ``out`` (none if it does not exist)."""
    if not out.is_file():
        return set()
    with disk_errors(out, "T-REX grid CSV"), open(out, newline="") as f:
        return {(r["env_name"], int(r["num_dems"]), int(r["seed"])) for r in csv.DictReader(f)}


def _quiet_run(cfg: TrexConfig) -> dict:
    return train_reward(cfg, progress=False)


def run_grid(args: GridArgs) -> list[dict]:
    """Train every cell; rows are appended to ``args.out`` as cells finish. Returns the rows."""
    configs = grid_configs(args)
    rows = []
    with Progress() as bar:
        task = bar.add_task(f"trex grid ({len(configs)} runs)", total=len(configs))

        def done(row: dict) -> None:
            append_summary(args.out, [row])
            rows.append(row)
            bar.advance(task)

        if args.ray_address is not None:
            ray = connect_ray(args.ray_address)
            remote = ray.remote(num_cpus=threads(args))(_quiet_run)
            pending = [remote.remote(c) for c in configs]
            while pending:
                ready, pending = ray.wait(pending)
                for ref in ready:
                    done(ray.get(ref))
        elif args.workers <= 1:
            for cfg in configs:
                done(_quiet_run(cfg))
        else:
            with ProcessPoolExecutor(args.workers, mp_context=get_context("spawn")) as pool:
                for future in as_completed([pool.submit(_quiet_run, c) for c in configs]):
                    done(future.result())
    return rows


def main(argv: list[str], prog: str = "proclab trex grid") -> None:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", default="batched")
    known, rest = pre.parse_known_args(argv)
    for flag in (a.split("=", 1)[0] for a in rest):
        if flag in SET_BY_GRID:
            raise ProclabError(f"the grid sets {flag[2:]} of every run; give {SET_BY_GRID[flag]} instead")
    train = trex_preset(known.preset)
    runtime = {f.name: getattr(train, f.name) for f in fields(RuntimeConfig)}  # a preset's (parity: fp32)
    description = (
        f"{GridArgs.__doc__}\n\n--preset NAME   every run starts from trex train's named defaults: "
        f"{', '.join(TREX_PRESETS)} (default batched; --train.FIELD overrides one)"
    )
    default = GridArgs(train=train, **runtime)
    args = tyro.cli(GridArgs, args=rest, default=default, prog=prog, description=description)
    skipped = len(finished_cells(args.out)) if args.skip_done else 0
    rows = run_grid(args)
    print(f"{len(rows)} runs ({skipped} rows were already in {args.out}); summary rows in {args.out}")
