"""T-REX reward learning: wall-clock to reach the same validation accuracy, batched vs ``--preset parity``.

Both runs train on the same demos, the same validation pairs (same seed) and the same torch
threads, each for at most ``--budget`` seconds of training. Their clocks count optimisation
only (the per-epoch evaluations are excluded, which favours parity: the seed also measured
test metrics every epoch). The target is the lower of the two best validation accuracies;
each run's time to target is the training time of its first epoch at or above it.

Prints one JSON line per run and a last line with the speed-up:

    {"mode": "parity", "time_to_target_s": ..., "best_val_acc": ..., "pairs_seen": ..., ...}
    {"target_val_acc": 0.71, "speedup": 23.4, "num_demos": 50, ...}

Without ``--demos`` it builds a synthetic store whose frames show the reward (a known answer,
so both runs climb well above chance); with ``--demos`` it uses real demos from ``proclab trex
demos``:

    python benchmarks/trex_speed.py --budget 60
    python benchmarks/trex_speed.py --demos demos --num-demos 100 --budget 300
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from proclab.reward.command import parse_args
from proclab.reward.record_demos import write_synthetic_demos
from proclab.reward.train import train_reward


def curve(run_dir: str) -> list[tuple[float, float, int]]:
    """(training seconds, validation accuracy, pairs seen) after each epoch of a run."""
    with open(Path(run_dir) / "train_log.csv", newline="") as f:
        return [
            (float(r["train_seconds"]), float(r["val_acc"]), int(r["n_train_samples"]))
            for r in csv.DictReader(f)
        ]


def time_to(points: list[tuple[float, float, int]], target: float) -> tuple[float, int]:
    return next((t, n) for t, acc, n in points if acc >= target)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--demos", type=Path, default=None, help="demo store (default: a synthetic one)")
    p.add_argument("--num-demos", type=int, default=50)
    p.add_argument("--budget", type=float, default=300, help="training seconds per run")
    p.add_argument("--parity-epoch-pairs", type=int, default=100, help="parity's evaluation interval (pairs)")
    p.add_argument(
        "--batched-epoch-pairs", type=int, default=1000, help="batched evaluation interval (pairs)"
    )
    p.add_argument("--threads", type=int, default=1, help="torch threads for both runs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run-root", type=Path, default=Path("runs/bench"))
    p.add_argument("--test-demos", type=int, default=50, help="test demos of the synthetic store")
    p.add_argument(
        "--common-args", default="", help="extra 'trex train' flags for both runs, e.g. '--arch atari'"
    )
    p.add_argument("--batched-args", default="", help="extra 'trex train' flags for the batched run")
    p.add_argument("--parity-args", default="", help="extra 'trex train' flags for the parity run")
    args = p.parse_args(argv)

    workload = "real" if args.demos else "synthetic"
    if args.demos is None:
        store = Path(tempfile.mkdtemp()) / "demos"
        args.demos = write_synthetic_demos(store, 2 * args.num_demos, args.test_demos, lengths=(60, 300))
    common = dict(
        demos=args.demos,
        num_demos=args.num_demos,
        seed=args.seed,
        run_root=args.run_root,
        torch_threads=args.threads,
        time_limit=args.budget,
        max_epochs=100_000,
        patience=100_000,
    )
    batched = parse_args([*args.common_args.split(), *args.batched_args.split()])
    batched = replace(batched, **common, epoch_pairs=args.batched_epoch_pairs)
    parity = parse_args(["--preset", "parity", *args.common_args.split(), *args.parity_args.split()])
    parity = replace(parity, **common, epoch_pairs=args.parity_epoch_pairs, epoch_test_metrics=False)
    runs = {}
    for mode, cfg in (("batched", batched), ("parity", parity)):
        print(f"{mode} ...", file=sys.stderr, flush=True)
        row = train_reward(cfg, progress=False)
        runs[mode] = (cfg, row, curve(row["run_dir"]))
    target = min(max(acc for _, acc, _ in points) for _, _, points in runs.values())
    times = {}
    for mode, (cfg, row, points) in runs.items():
        seconds, pairs = time_to(points, target)
        times[mode] = seconds
        print(
            json.dumps(
                {
                    "mode": mode,
                    "time_to_target_s": round(seconds, 3),
                    "pairs_to_target": pairs,
                    "best_val_acc": round(max(acc for _, acc, _ in points), 4),
                    "train_seconds": round(points[-1][0], 3),
                    "pairs_seen": points[-1][2],
                    "pairs_per_s": round(points[-1][2] / points[-1][0], 1),
                    "batch_size": cfg.batch_size,
                    "lr": cfg.lr,
                    "precision": cfg.precision,
                    "net": cfg.net.arch,
                    "scale_input": cfg.net.scale_input,
                    "test_acc": round(row["test_acc"], 4),
                    "spearman": round(row["spearman"], 4),
                }
            ),
            flush=True,
        )
    print(
        json.dumps(
            {
                "target_val_acc": round(target, 4),
                "speedup": round(times["parity"] / max(times["batched"], 1e-9), 1),
                "num_demos": args.num_demos,
                "workload": workload,
                "budget_s": args.budget,
                "threads": args.threads,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
