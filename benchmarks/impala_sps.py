"""IMPALA training throughput with 1, 2, 4 actor processes, and PPO's on the same agent and envs, in one run.

Every measurement is a real ``proclab train`` run (learner, actors, logging; validation off)
on the modern-srwm setting (``impala-procgen``: unroll 50 x batch 32, the ``srwm-<core>``
agent) for ``--updates`` learner updates. The same ``--num-envs`` envs are split over the
actor processes, so the rows differ only in how many processes act. PPO then trains the same
agent on the same envs with its own defaults (256 steps per env, 3 epochs x 8 minibatches).

SPS = env steps trained / wall seconds between the first and the last logged update (actor
start-up excluded), as ``charts/SPS`` reports it. Prints one JSON line per run:

    {"benchmark": "impala_sps", "algo": "impala", "actors": 2, "num_envs": 32, "sps": ..., "policy_lag": ...}

CPU, a few minutes:      python benchmarks/impala_sps.py --core srwm --num-envs 16 --updates 6
GPU box (seed's 48 envs): python benchmarks/impala_sps.py --device cuda --num-envs 48 --actors 6,12,24
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from proclab.io.run_dirs import read_metrics
from proclab.models import agent_preset
from proclab.rl.config import PRESETS, PPOConfig, TrainConfig


def measured(run: Path) -> dict:
    """SPS from the first to the last logged update (at least two updates)."""
    m = read_metrics(run)
    steps, wall = m["step"], m["wall_time"]
    out = {"sps": round((steps[-1] - steps[0]) / max(wall[-1] - wall[0], 1e-9), 1), "steps": int(steps[-1])}
    for key in ("charts/policy_lag", "charts/learner_wait_fraction"):
        if key in m:
            out[key.split("/")[1]] = round(statistics.fmean(m[key][1:] or m[key]), 3)
    return out


def impala_run(base: TrainConfig, actors: int, updates: int) -> dict:
    from proclab.rl.impala_train import ImpalaTrainer

    cfg = replace(base, impala=replace(base.impala, num_actors=actors, total_steps=updates * 32 * 50))
    return measured(ImpalaTrainer(cfg).train(progress=False))


def ppo_run(base: TrainConfig, updates: int) -> dict:
    from proclab.rl.ppo_train import Trainer

    ppo = PPOConfig(total_steps=updates * base.env.num_envs * 256)
    return measured(Trainer(replace(base, algo="ppo", ppo=ppo)).train(progress=False))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--core", default="lstm", help="agent preset srwm-<core> (none, lstm, delta, srwm, ...)")
    p.add_argument("--num-envs", type=int, default=32, help="envs, split over the actor processes")
    p.add_argument("--actors", default="1,2,4", help="comma-separated actor-process counts")
    p.add_argument("--updates", type=int, default=8, help="IMPALA updates (x 1,600 env steps) per run, >= 2")
    p.add_argument(
        "--ppo-updates", type=int, default=2, help="PPO updates (x num_envs x 256 steps); 0 = skip"
    )
    p.add_argument("--game", default="starpilot")
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="auto")
    p.add_argument("--threads", type=int, default=0, help="learner torch threads (0 = torch's default)")
    args = p.parse_args()
    if 0 < args.ppo_updates < 2:
        p.error(
            "--ppo-updates must be 0 (skip) or at least 2: SPS is measured between the first and last update"
        )

    with tempfile.TemporaryDirectory() as root:
        base = replace(
            PRESETS["impala-procgen"],
            env=replace(PRESETS["impala-procgen"].env, game=(args.game,), num_envs=args.num_envs),
            agent=agent_preset(f"srwm-{args.core}"),
            val_num_envs=0,
            run_root=Path(root),
            device=args.device,
            precision=args.precision,
            torch_threads=args.threads,
            tensorboard=False,
            checkpoint_every=10**12,
        )
        common = {
            "benchmark": "impala_sps",
            "agent": f"srwm-{args.core}",
            "game": args.game,
            "num_envs": args.num_envs,
            "device": args.device,
        }
        for actors in [int(a) for a in args.actors.split(",")]:
            print(f"impala with {actors} actor processes ...", file=sys.stderr, flush=True)
            row = impala_run(base, actors, args.updates)
            print(json.dumps({**common, "algo": "impala", "actors": actors, **row}), flush=True)
        if args.ppo_updates > 0:
            print("ppo on the same agent ...", file=sys.stderr, flush=True)
            row = ppo_run(base, args.ppo_updates)
            print(json.dumps({**common, "algo": "ppo", "actors": 0, **row}), flush=True)


if __name__ == "__main__":  # actor processes start from a fork server: keep module import side-effect free
    main()
