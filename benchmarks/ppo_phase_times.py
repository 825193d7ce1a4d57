"""Where a PPO update's time goes: env stepping, rollout inference and bookkeeping, learner.

Builds the trainer of ``--preset cleanrl`` (or another preset) on the given device, runs one warm-up
update, then times ``--updates`` updates phase by phase, synchronising the device around each phase
(so the numbers add up to wall time; the sync itself costs little next to a phase). Also times raw
env stepping with random actions for each ``--env-threads`` value, to see how far procgen's thread
pool is from the learner.

    python benchmarks/ppo_phase_times.py --device cuda --updates 5 --env-threads 4 8 16

Prints one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from proclab.config import preset
from proclab.envs.vec_env import ProcgenVecEnv
from proclab.rl.train import Trainer


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device, totals: dict, key: str):
    """Wrap ``fn`` so that its synchronised wall time accumulates in ``totals[key]``."""

    def wrapper(*args, **kwargs):
        sync(device)
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        sync(device)
        totals[key] = totals.get(key, 0.0) + time.perf_counter() - t0
        return out

    return wrapper


def phase_times(args, root: Path) -> dict:
    cfg = preset(args.preset)
    cfg = replace(
        cfg,
        env=replace(cfg.env, game=(args.game,), num_threads=args.env_threads[0], num_envs=args.num_envs),
        ppo=replace(cfg.ppo, total_steps=10**9, num_steps=args.num_steps),
        val_num_envs=0,
        device=args.device,
        precision=args.precision,
        tensorboard=False,
        checkpoint_every=10**12,
        run_root=root,
    )
    trainer = Trainer(cfg)
    device = trainer.actor.rt.device
    trainer.actor.collect(trainer.rollout)  # warm-up: cudnn autotuning, allocator
    trainer.learner.update(trainer.rollout)
    totals: dict[str, float] = {}
    trainer.actor.env_step = timed(trainer.actor.env_step, device, totals, "env_step")
    trainer.actor.act = timed(trainer.actor.act, device, totals, "inference")
    collect = timed(trainer.actor.collect, device, totals, "rollout")
    update = timed(trainer.learner.update, device, totals, "learner")
    t0 = time.perf_counter()
    for _ in range(args.updates):
        collect(trainer.rollout)
        update(trainer.rollout)
    wall = time.perf_counter() - t0
    steps = args.updates * trainer.batch
    totals["rollout_other"] = totals["rollout"] - totals["env_step"] - totals["inference"]
    per_update = {k: round(v / args.updates, 4) for k, v in totals.items()}
    return {"wall_per_update_s": round(wall / args.updates, 4), "sps": round(steps / wall, 1), **per_update}


def env_sps(game: str, num_envs: int, threads: int, steps: int) -> float:
    """Steps/s of the bare vector env with uniformly random actions (no agent, no copies to a device)."""
    env = ProcgenVecEnv(replace(preset("cleanrl").env, game=(game,), num_envs=num_envs, num_threads=threads))
    rng = np.random.default_rng(0)
    env.reset()
    t0 = time.perf_counter()
    for _ in range(steps):
        env.step(rng.integers(0, 15, num_envs))
    sps = steps * num_envs / (time.perf_counter() - t0)
    env.close()
    return sps


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="cleanrl")
    p.add_argument("--game", default="starpilot")
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", default="auto")
    p.add_argument("--updates", type=int, default=3)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--num-steps", type=int, default=256, help="rollout length per env")
    p.add_argument("--env-threads", type=int, nargs="+", default=[4], help="procgen threads to try")
    args = p.parse_args(argv)
    base = {"benchmark": "ppo_phase_times", "preset": args.preset, "game": args.game, "device": args.device}
    with tempfile.TemporaryDirectory() as root:
        times = phase_times(args, Path(root))
    print(json.dumps({**base, "precision": args.precision, "env_threads": args.env_threads[0], **times}))
    for threads in args.env_threads:
        sps = env_sps(args.game, args.num_envs, threads, 2 * args.num_steps)
        print(
            json.dumps({**base, "what": "env_only_random_actions", "env_threads": threads, "sps": round(sps)})
        )


if __name__ == "__main__":
    main()
