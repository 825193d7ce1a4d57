"""Where a PPO update's time goes: seconds per phase of the ``cleanrl`` preset's loop.

Runs the real :class:`~proclab.rl.ppo_train.Trainer` (64 envs x 256 steps, 3 epochs x 8 minibatches,
IMPALA CNN, starpilot) for ``--updates`` updates and times each phase by wrapping the functions
that do it, so the numbers describe the code users run, not a re-implementation:

* rollout: ``env_step`` (procgen + reward normalisation + copies into tensors),
  ``inference`` (the agent's forward pass on the current observations), ``rollout_other``
  (action sampling, writes into the rollout buffers); with ``--actings graph`` or ``overlap``
  (:mod:`proclab.rl.overlap`) these run interleaved or side by side, so only their total
  ``rollout`` is given;
* update: ``gae``, ``minibatch_gather`` (indexing the rollout), ``forward``, ``loss``,
  ``backward``, ``optimizer`` (gradient clipping + Adam), ``update_other`` (statistics, host syncs);
* ``logging`` (metrics row, checkpoint at the end).

Prints one JSON line per precision with seconds per update for each phase, the SPS and the learner
layout the run chose (``--learner-layout`` gives one). Where the learner computes pieces side by
side (a ``workers`` layout), ``forward``, ``loss`` and ``backward`` (``torch.autograd.grad`` there)
are timed in the workers and divided by their number: the wall share they would have with every
worker busy.
The wrappers cost microseconds per call; timings are wall-clock, so run it on a quiet machine or
compare phases rather than absolute values. On a GPU (``--device cuda``) every timed call is
synchronised with the device, so that each phase owns its kernels' time. ``--env-threads`` also
times the bare vector env with random actions for each procgen thread count (the first one is
the trainer's), to see how far procgen's thread pool is from the rest.

    python benchmarks/ppo_profile.py --updates 1 --precisions fp32
    python benchmarks/ppo_profile.py --device cuda --updates 4 --precisions auto --env-threads 4 8 16
    python benchmarks/ppo_profile.py --device cuda --updates 4 --actings eager graph overlap
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

import proclab.rl.ppo as ppo_module
from ppo_sps import cleanrl_config
from proclab.envs.vec_env import ProcgenVecEnv
from proclab.rl.overlap import GroupedActor
from proclab.rl.ppo_train import Trainer
from proclab.run.runtime import cpu_has_native_bf16


class Clock:
    """Accumulates wall seconds per phase; :meth:`wrap` times every call of a function."""

    def __init__(self, device: torch.device):
        self.seconds: dict[str, float] = defaultdict(float)
        self.sync = torch.cuda.synchronize if device.type == "cuda" else lambda: None

    def wrap(self, phase: str, fn):
        def timed(*args, **kwargs):
            self.sync()
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.sync()
                self.seconds[phase] += time.perf_counter() - start

        return timed

    def wrap_generator(self, phase: str, fn):
        """Time only the work done inside the generator (between the consumer's ``next`` calls)."""

        def timed(*args, **kwargs):
            it = fn(*args, **kwargs)
            while True:
                start = time.perf_counter()
                try:
                    item = next(it)
                except StopIteration:
                    return
                finally:
                    self.seconds[phase] += time.perf_counter() - start
                yield item

        return timed


def profile(args, precision: str) -> tuple[dict, str]:
    updates = args.updates
    cfg = cleanrl_config(
        updates,
        args.game,
        precision,
        args.threads,
        args.device,
        args.num_steps,
        num_threads=args.env_threads[0],
    )
    cfg = replace(cfg, learner_layout=args.learner_layout)
    originals = (ppo_module.gae, ppo_module.ppo_loss, torch.Tensor.backward, torch.autograd.grad)
    with tempfile.TemporaryDirectory() as root:
        trainer = Trainer(replace(cfg, run_root=Path(root)))
        actor, learner = trainer.actor, trainer.learner
        clock = Clock(actor.rt.device)
        actor.env_step = clock.wrap("env_step", actor.env_step)
        actor.forward = clock.wrap("inference", actor.forward)
        actor.collect = clock.wrap("rollout", actor.collect)
        learner.update = clock.wrap("update", learner.update)
        learner._minibatches = clock.wrap_generator("minibatch_gather", learner._minibatches)
        learner._forward = clock.wrap("forward", learner._forward)
        learner.optimizer.step = clock.wrap("adam", learner.optimizer.step)
        clip = torch.nn.utils.clip_grad_norm_
        torch.nn.utils.clip_grad_norm_ = clock.wrap("clip", clip)
        ppo_module.gae = clock.wrap("gae", ppo_module.gae)
        ppo_module.ppo_loss = clock.wrap("loss", ppo_module.ppo_loss)
        torch.Tensor.backward = clock.wrap("backward", torch.Tensor.backward)
        torch.autograd.grad = clock.wrap("backward", torch.autograd.grad)
        try:
            start = time.perf_counter()
            trainer.train(progress=False)
            total = time.perf_counter() - start
        finally:
            ppo_module.gae, ppo_module.ppo_loss, torch.Tensor.backward, torch.autograd.grad = originals
            torch.nn.utils.clip_grad_norm_ = clip
    s = {k: v / updates for k, v in clock.seconds.items()}
    for phase in ("forward", "loss", "backward"):  # thread-seconds in the workers -> wall share
        s[phase] /= max(1, learner.rt.workers)
    grouped = isinstance(actor, GroupedActor)  # env steps and inference overlap: only their total
    phases = {
        "rollout": s["rollout"],
        "env_step": None if grouped else s["env_step"],
        "inference": None if grouped else s["inference"],
        "rollout_other": None if grouped else s["rollout"] - s["env_step"] - s["inference"],
        "gae": s["gae"],
        "minibatch_gather": s["minibatch_gather"],
        "forward": s["forward"],
        "loss": s["loss"],
        "backward": s["backward"],
        "optimizer": s["clip"] + s["adam"],
    }
    phases["update_other"] = s["update"] - sum(phases[k] for k in list(phases)[4:])
    phases["logging"] = total / updates - s["rollout"] - s["update"]
    phases["total"] = total / updates
    return {k: round(v, 3) for k, v in phases.items()}, str(trainer.layout.layout)


def env_sps(game: str, threads: int, steps: int = 512) -> float:
    """Steps/s of the bare 64-env vector env with uniformly random actions (no agent, no device copies)."""
    env = ProcgenVecEnv(cleanrl_config(1, game, "fp32", 0, num_threads=threads).env)
    actions = np.random.default_rng(0).integers(0, 15, (steps, env.num_envs))
    env.reset()
    start = time.perf_counter()
    for a in actions:
        env.step(a)
    sps = steps * env.num_envs / (time.perf_counter() - start)
    env.close()
    return sps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--updates", type=int, default=1, help="PPO updates (x 16,384 env steps) per precision"
    )
    parser.add_argument("--game", default="starpilot")
    parser.add_argument("--precisions", nargs="+", default=["fp32"], help="auto, fp32 and/or bf16")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = proclab's default)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    parser.add_argument(
        "--env-threads", type=int, nargs="+", default=[4], help="procgen threads (the first: the trainer's)"
    )
    parser.add_argument(
        "--num-steps", type=int, default=256, help="steps per env and update (the preset's 256)"
    )
    parser.add_argument(
        "--learner-layout", default="auto", help="auto, measure or PIECE:SCHEME[,acting:SCHEME]"
    )
    args = parser.parse_args()
    base = {"benchmark": "ppo_profile", "preset": "cleanrl", "game": args.game, "device": args.device}
    for precision in args.precisions:
        seconds, layout = profile(args, precision)
        line = {
            **base,
            "precision": precision,
            "layout": layout,
            "load": os.getloadavg()[0],
            "native_bf16": cpu_has_native_bf16(),
            "updates": args.updates,
            "env_threads": args.env_threads[0],
            "seconds_per_update": seconds,
            "num_steps": args.num_steps,
            "sps": round(64 * args.num_steps / seconds["total"], 1),
        }
        print(json.dumps(line), flush=True)
    for threads in args.env_threads:
        line = {
            **base,
            "what": "env_only_random_actions",
            "env_threads": threads,
            "sps": round(env_sps(args.game, threads)),
        }
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
