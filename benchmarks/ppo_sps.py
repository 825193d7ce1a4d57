"""PPO training throughput: proclab's optimised path vs its plain fp32 path (and CleanRL), one run.

Runs ``--preset cleanrl`` (the Procgen paper's easy hyperparameters: 64 envs x 256 steps,
3 epochs x 8 minibatches, IMPALA CNN) on starpilot for a fixed number of updates with

* ``optimised``: bf16 autocast + channels-last convolutions (proclab's default here),
* ``fp32``: plain fp32 with NCHW convolutions,
* ``cleanrl`` (optional): CleanRL's ``ppo_procgen.py``, given with ``--cleanrl PATH`` and the
  interpreter of an environment where it runs (``--cleanrl-python``; it needs gym 0.23).

SPS = env steps / seconds of the training loop (rollouts + updates), as CleanRL prints it.
Prints one JSON line per path with its ratio to the fp32 path and, if measured, to CleanRL.

    python benchmarks/ppo_sps.py --updates 3 [--cleanrl ~/cleanrl/ppo_procgen.py --cleanrl-python ~/venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

from proclab.config import preset
from proclab.io.runs import read_metrics
from proclab.rl.train import Trainer


def proclab_sps(updates: int, game: str, precision: str, channels_last: bool, threads: int) -> float:
    cfg = preset("cleanrl")
    cfg = replace(
        cfg,
        env=replace(cfg.env, game=(game,)),
        ppo=replace(cfg.ppo, total_steps=updates * cfg.env.num_envs * cfg.ppo.num_steps),
        precision=precision,
        channels_last=channels_last,
        device="cpu",
        torch_threads=threads,
        tensorboard=False,
        checkpoint_every=10**12,
    )
    with tempfile.TemporaryDirectory() as root:
        run = Trainer(replace(cfg, run_root=Path(root))).train(progress=False)
        m = read_metrics(run)
    return m["step"][-1] / m["wall_time"][-1]


def cleanrl_sps(script: str, python: str, updates: int, game: str) -> float:
    steps = updates * 64 * 256
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run(
            [python, script, "--env-id", game, "--total-timesteps", str(steps), "--no-cuda"],
            capture_output=True, text=True, cwd=cwd, check=True,
        ).stdout  # fmt: skip
    return float(re.findall(r"SPS: (\d+)", out)[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=3, help="PPO updates (x 16,384 env steps) per path")
    parser.add_argument("--game", default="starpilot")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    parser.add_argument("--cleanrl", default=None, help="path to CleanRL's ppo_procgen.py")
    parser.add_argument("--cleanrl-python", default="python", help="interpreter that runs it")
    args = parser.parse_args()

    results = {}
    if args.cleanrl:
        results["cleanrl"] = cleanrl_sps(args.cleanrl, args.cleanrl_python, args.updates, args.game)
    results["fp32"] = proclab_sps(args.updates, args.game, "fp32", False, args.threads)
    results["optimised"] = proclab_sps(args.updates, args.game, "bf16", True, args.threads)
    for path, sps in results.items():
        line = {"benchmark": "ppo_sps", "preset": "cleanrl", "game": args.game, "updates": args.updates,
                "path": path, "sps": round(sps, 1), "ratio_vs_fp32": round(sps / results["fp32"], 3)}  # fmt: skip
        if "cleanrl" in results:
            line["ratio_vs_cleanrl"] = round(sps / results["cleanrl"], 3)
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
