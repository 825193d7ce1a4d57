"""PPO training throughput: what a user gets from proclab, side by side with CleanRL, one run.

Runs ``proclab train --preset cleanrl`` (the Procgen paper's easy hyperparameters: 64 envs x 256
steps, 3 epochs x 8 minibatches, IMPALA CNN) on starpilot for a fixed number of updates, each in a
fresh process, along these paths:

* ``auto``: the default, ``--precision auto`` (bf16 autocast where the CPU runs bf16 natively,
  fp32 elsewhere; channels-last convolutions; the learner layout chosen by timing),
* ``fp32``: ``--precision fp32``, what ``auto`` picks on CPUs without native bf16,
* ``bf16``: ``--precision bf16``, only where the CPU runs bf16 natively (emulated bf16 is many
  times slower and nobody would choose it),
* ``PRECISION/LAYOUT``, e.g. ``fp32/128:workers``: that precision with ``--learner-layout LAYOUT``,
* ``baseline`` (with ``--baseline-src DIR``): ``auto`` run by another checkout's proclab (its
  ``src`` folder on ``PYTHONPATH``), e.g. the main branch, to compare before and after in one run,
* ``cleanrl`` (optional): CleanRL's ``ppo_procgen.py``, given with ``--cleanrl PATH`` and the
  interpreter of an environment where it runs (``--cleanrl-python``; it needs gym 0.23.1, procgen,
  tyro and tensorboard). Fetch it yourself, outside this repository; proclab ships none of it.

The paths are interleaved ``--repeats`` times (cleanrl, auto, fp32, ..., cleanrl, auto, ...), so
that a machine shared with other work slows them alike. SPS = env steps / seconds of the
training loop (rollouts + updates), as CleanRL prints it; a layout's timing at the start of a run
(a few seconds, only when the cache has no choice yet: the runs share a fresh cache, so the first
repeat times each precision once) is outside the loop and reported apart. Right before each
proclab measurement the CPU's PPO compute limit for its precision is measured (``ppo_limit.py``:
the best time of the agent's learner and acting passes on all cores) with the env stepping of the
preset beside it, so that both fractions of the limit (``fraction_of_limit``: compute only;
``fraction_of_limit_with_env``: compute + env stepping) are taken under nearly the same load.
Prints a first line with the CPU and its bf16 capability, one JSON line per measurement (with the
layout the run used), then one summary line per path: median SPS, the median, lowest and highest
of the per-repeat fractions of the limits and, when CleanRL ran, of the per-repeat ratios to it.

    python benchmarks/ppo_sps.py --updates 3 [--repeats 2 --baseline-src ../main/src --cleanrl ~/cleanrl/ppo_procgen.py --cleanrl-python ~/venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from ppo_limit import measure_limit
from proclab.io.run_dirs import read_metrics
from proclab.rl.config import preset
from proclab.run.runtime import cpu_has_native_bf16, cpu_name

SRC = Path(__file__).resolve().parents[1] / "src"  # this checkout's proclab


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


def proclab_sps(path: str, args, cache: Path) -> dict:
    """One ``proclab train`` run of ``path`` in a fresh process: its SPS and the layout it used."""
    precision, _, layout = path.partition("/")
    src = Path(args.baseline_src) if path == "baseline" else SRC
    steps = args.updates * 64 * args.num_steps
    with tempfile.TemporaryDirectory() as root:
        command = [
            *(sys.executable, "-m", "proclab", "train", "--preset", "cleanrl", "--game", args.game),
            *("--num-steps", str(args.num_steps), "--total-steps", str(steps), "--device", "cpu"),
            *("--precision", "auto" if path == "baseline" else precision, "--run-root", root),
            *("--no-tensorboard", "--checkpoint-every", str(10**12)),
            *(("--torch-threads", str(args.threads)) if args.threads else ()),
            *(("--learner-layout", layout) if layout else ()),
        ]
        env = {**os.environ, "PYTHONPATH": str(src.resolve()), "XDG_CACHE_HOME": str(cache)}
        out = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
        (run,) = Path(root).glob("ppo/*/*/*")
        m = read_metrics(run)
        used = json.loads((run / "config.json").read_text()).get("learner_layout", "none (fixed by the code)")
    timed = re.search(r"learner layout: .* \((measured in ([\d.]+) s|cached|given)", out)
    line = {"sps": round(m["step"][-1] / m["wall_time"][-1], 1), "layout": used}
    if timed and timed.group(2):
        line["layout_timing_s"] = float(timed.group(2))
    return line


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


def parse_args() -> argparse.Namespace:
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
        help="proclab paths to measure: auto, fp32, bf16 (skipped without native bf16), PRECISION/LAYOUT",
    )
    parser.add_argument(
        "--baseline-src", default=None, help="another checkout's src folder: adds its auto path, 'baseline'"
    )
    parser.add_argument(
        "--no-limit", action="store_true", help="skip the compute-limit measurement before each path"
    )
    parser.add_argument("--cleanrl", default=None, help="path to CleanRL's ppo_procgen.py")
    parser.add_argument("--cleanrl-python", default="python", help="interpreter that runs it")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    native = cpu_has_native_bf16()
    paths = [p for p in args.paths if p != "bf16" or native]
    paths = ["cleanrl"] * bool(args.cleanrl) + paths + ["baseline"] * bool(args.baseline_src)
    header = {"cpu": cpu_name(), "native_bf16": native, "auto_picks": "bf16" if native else "fp32"}
    header |= {"torch": torch.__version__, "torch_threads": args.threads or torch.get_num_threads()}
    print(json.dumps({"benchmark": "ppo_sps", **header, "paths": paths}), flush=True)
    base = {
        "benchmark": "ppo_sps",
        "preset": "cleanrl",
        "game": args.game,
        "updates": args.updates,
        "num_steps": args.num_steps,
    }
    lines: dict[str, list[dict]] = {p: [] for p in paths}
    with tempfile.TemporaryDirectory() as cache:
        for repeat in range(args.repeats):
            for path in paths:
                line = {**base, "repeat": repeat, "path": path, "load": os.getloadavg()[0]}
                if path == "cleanrl":
                    line["sps"] = cleanrl_sps(
                        args.cleanrl, args.cleanrl_python, args.updates, args.game, args.num_steps
                    )
                else:
                    if not args.no_limit:
                        precision = path.partition("/")[0]
                        if precision in ("auto", "baseline"):
                            precision = "bf16" if native else "fp32"
                        line["limit"] = measure_limit(precision, args.threads, game=args.game)
                    line |= proclab_sps(path, args, Path(cache))
                lines[path].append(line)
                print(json.dumps(line), flush=True)
    cleanrl = [line["sps"] for line in lines.get("cleanrl", [])]
    for path, measured in lines.items():
        print(json.dumps(summary(base, path, measured, cleanrl)), flush=True)


def summary(base: dict, path: str, lines: list[dict], cleanrl: list[float]) -> dict:
    """One path's line: median SPS, and the median (lowest, highest) per-repeat fractions of the
    compute limit (alone and with env stepping) and ratio to CleanRL, where measured."""

    def spread(name: str, ratios: list[float]) -> dict:
        return {
            name: round(statistics.median(ratios), 3),
            f"{name}_min": round(min(ratios), 3),
            f"{name}_max": round(max(ratios), 3),
        }

    values = [line["sps"] for line in lines]
    out = {
        **base,
        "repeats": len(values),
        "path": path,
        "sps_median": round(statistics.median(values), 1),
        "sps": values,
        "layouts": sorted({line["layout"] for line in lines if "layout" in line}),
    }
    if all("limit" in line for line in lines) and path != "cleanrl":
        for key, name in (
            ("limit_sps", "fraction_of_limit"),
            ("limit_with_env_sps", "fraction_of_limit_with_env"),
        ):
            limits = [line["limit"][key] for line in lines]
            out[key] = limits
            out.update(spread(name, [v / lim for v, lim in zip(values, limits, strict=True)]))
    if cleanrl and path != "cleanrl":
        out.update(spread("ratio_vs_cleanrl", [v / c for v, c in zip(values, cleanrl, strict=True)]))
    return out


if __name__ == "__main__":
    main()
