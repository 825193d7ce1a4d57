"""PPO training throughput: what a user gets from proclab, side by side with CleanRL, one run.

Runs ``--preset cleanrl`` (the Procgen paper's easy hyperparameters: 64 envs x 256 steps,
3 epochs x 8 minibatches, IMPALA CNN) on starpilot for a fixed number of updates along

* ``auto``: the default, ``--precision auto`` (bf16 autocast where the CPU runs bf16 natively,
  fp32 elsewhere; channels-last convolutions),
* ``fp32``: ``--precision fp32``, what ``auto`` picks on CPUs without native bf16,
* ``fp32-intra``: the fp32 path as it was before its pieces ran side by side (``Runtime.workers``
  = 0: one 128-sample piece at a time on torch's intra-op threads, the acting forward pass on all
  envs at once), for a before/after comparison in one run,
* ``bf16``: ``--precision bf16``, only where the CPU runs bf16 natively (emulated bf16 is many
  times slower and nobody would choose it),
* ``cleanrl`` (optional): CleanRL's ``ppo_procgen.py``, given with ``--cleanrl PATH`` and the
  interpreter of an environment where it runs (``--cleanrl-python``; it needs gym 0.23.1, procgen,
  tyro and tensorboard). Fetch it yourself, outside this repository; proclab ships none of it.

The paths are interleaved ``--repeats`` times (cleanrl, auto, fp32, ..., cleanrl, auto, ...), so
that a machine shared with other work slows them alike. SPS = env steps / seconds of the
training loop (rollouts + updates), as CleanRL prints it. Right before each proclab measurement
the CPU's PPO compute limit for its precision is measured (``ppo_limit.py``: the best time of the
agent's learner and acting passes on all cores), so that the fraction of the limit reached is
taken under nearly the same load. Prints a first line with the CPU and its bf16 capability, one JSON line
per measurement, then one summary line per path: median SPS, the median, lowest and highest of the
per-repeat fractions of the limit and, when CleanRL ran, of the per-repeat ratios to it.

    python benchmarks/ppo_sps.py --updates 3 [--repeats 2 --cleanrl ~/cleanrl/ppo_procgen.py --cleanrl-python ~/venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from ppo_limit import measure_limit
from proclab.io.run_dirs import read_metrics
from proclab.rl.config import preset
from proclab.rl.ppo_train import Trainer
from proclab.run.runtime import cpu_has_native_bf16, cpu_name


def cleanrl_config(
    updates: int, game: str, precision: str, threads: int, device: str = "cpu", num_steps: int = 256, **env
):
    """``--preset cleanrl`` for ``updates`` updates of ``num_steps`` steps per env on ``game``, quiet
    (no TensorBoard, no checkpoints)."""
    cfg = preset("cleanrl")
    return replace(
        cfg,
        env=replace(cfg.env, game=(game,), **env),
        ppo=replace(cfg.ppo, num_steps=num_steps, total_steps=updates * cfg.env.num_envs * num_steps),
        precision=precision,
        device=device,
        torch_threads=threads,
        tensorboard=False,
        checkpoint_every=10**12,
    )


def proclab_sps(updates: int, game: str, path: str, threads: int, num_steps: int) -> float:
    with tempfile.TemporaryDirectory() as root:
        cfg = cleanrl_config(updates, game, path.removesuffix("-intra"), threads, num_steps=num_steps)
        trainer = Trainer(replace(cfg, run_root=Path(root)))
        if path.endswith("-intra"):  # no workers: every pass on the intra-op threads
            trainer.rt = trainer.learner.rt = trainer.actor.rt = replace(trainer.rt, workers=0)
            trainer.actor.slices = []
        m = read_metrics(trainer.train(progress=False))
    return m["step"][-1] / m["wall_time"][-1]


def cleanrl_sps(script: str, python: str, updates: int, game: str, num_steps: int) -> float:
    steps = updates * 64 * num_steps
    command = [
        python,
        script,
        "--env-id",
        game,
        "--total-timesteps",
        str(steps),
        "--num-steps",
        str(num_steps),
    ]
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run(
            [*command, "--no-cuda"],
            capture_output=True,
            text=True,
            cwd=cwd,
            check=True,
        ).stdout
    return float(re.findall(r"SPS: (\d+)", out)[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--updates", type=int, default=3, help="PPO updates (x 16,384 env steps) per measurement"
    )
    parser.add_argument("--repeats", type=int, default=1, help="rounds over all paths, interleaved")
    parser.add_argument(
        "--num-steps",
        type=int,
        default=256,
        help="steps per env and update, for both (the preset's 256; 64 gives minibatches of 512 and a "
        "4x shorter run, for busy machines)",
    )
    parser.add_argument("--game", default="starpilot")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    parser.add_argument(
        "--paths",
        nargs="+",
        default=["auto", "fp32", "bf16"],
        help="proclab paths to measure: auto, fp32, fp32-intra, bf16 (skipped without native bf16)",
    )
    parser.add_argument(
        "--no-limit", action="store_true", help="skip the compute-limit measurement before each path"
    )
    parser.add_argument("--cleanrl", default=None, help="path to CleanRL's ppo_procgen.py")
    parser.add_argument("--cleanrl-python", default="python", help="interpreter that runs it")
    args = parser.parse_args()

    native = cpu_has_native_bf16()
    paths = [p for p in args.paths if p != "bf16" or native]
    if args.cleanrl:
        paths.insert(0, "cleanrl")
    print(
        json.dumps(
            {
                "benchmark": "ppo_sps",
                "cpu": cpu_name(),
                "native_bf16": native,
                "auto_picks": "bf16" if native else "fp32",
                "torch": torch.__version__,
                "torch_threads": args.threads or torch.get_num_threads(),
                "paths": paths,
            }
        ),
        flush=True,
    )
    base = {
        "benchmark": "ppo_sps",
        "preset": "cleanrl",
        "game": args.game,
        "updates": args.updates,
        "num_steps": args.num_steps,
    }
    runs: dict[str, list[float]] = {p: [] for p in paths}
    limits: dict[str, list[float]] = {p: [] for p in paths if p != "cleanrl"}
    for repeat in range(args.repeats):
        for path in paths:
            line = {**base, "repeat": repeat, "path": path}
            if path == "cleanrl":
                sps = cleanrl_sps(args.cleanrl, args.cleanrl_python, args.updates, args.game, args.num_steps)
            else:
                if not args.no_limit:
                    precision = "bf16" if path == "bf16" or (path == "auto" and native) else "fp32"
                    line["limit"] = measure_limit(precision, args.threads)
                    limits[path].append(line["limit"]["limit_sps"])
                sps = proclab_sps(args.updates, args.game, path, args.threads, args.num_steps)
            runs[path].append(sps)
            print(json.dumps({**line, "sps": round(sps, 1)}), flush=True)
    for path, values in runs.items():
        print(json.dumps(summary(base, path, values, limits.get(path), runs.get("cleanrl"))), flush=True)


def summary(base: dict, path: str, values: list[float], limits, cleanrl) -> dict:
    """One path's line: median SPS, and the median (lowest, highest) per-repeat fraction of the
    compute limit and ratio to CleanRL, where measured."""

    def spread(name: str, ratios: list[float]) -> dict:
        return {
            name: round(statistics.median(ratios), 3),
            f"{name}_min": round(min(ratios), 3),
            f"{name}_max": round(max(ratios), 3),
        }

    line = {
        **base,
        "repeats": len(values),
        "path": path,
        "sps_median": round(statistics.median(values), 1),
        "sps": [round(v, 1) for v in values],
    }
    if limits:
        line["limit_sps"] = limits
        line.update(spread("fraction_of_limit", [v / lim for v, lim in zip(values, limits, strict=True)]))
    if cleanrl and path != "cleanrl":
        line.update(spread("ratio_vs_cleanrl", [v / c for v, c in zip(values, cleanrl, strict=True)]))
    return line


if __name__ == "__main__":
    main()
