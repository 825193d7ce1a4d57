"""The PPO compute limit of this CPU: the SPS the ``cleanrl`` preset would reach if it did nothing
but the network's arithmetic.

A PPO update of the ``cleanrl`` preset spends, per env step, one acting forward pass (batch of the
64 envs, inference mode) and ``update_epochs`` (3) learner forward+backward passes. Everything else
(procgen, sampling, GAE, the loss, Adam, logging) is overhead. This script times the two passes of
the preset's IMPALA-CNN agent on all cores, in the best way it finds:

* learner forward+backward on pieces of 64 or 128 samples, either one piece at a time with
  torch's intra-op threads (``intra``), or one piece per core side by side, each computed by a
  single-threaded worker (``workers``);
* the acting forward pass on the 64 envs' observations, whole with intra-op threads, or split into
  one slice per core computed side by side.

The limit is ``1 / (epochs x best learner seconds per sample + best acting seconds per sample)``.
Besides compute, every env step must also be stepped by procgen: :func:`measure_env` times the
preset's 64-env vector env with random actions, and ``limit_with_env_sps`` is
``1 / (compute seconds + env seconds per sample)``, the limit of a loop that does not overlap env
stepping with compute (proclab's does not). Timings are wall-clock; on a machine shared with other work the limit falls with the load, which
is why ``ppo_sps.py`` measures it beside every proclab measurement. The schemes here are written for
this benchmark (random frames, a plain loss on the outputs), independent of proclab's learner, so
the limit does not move when the learner does.

    python benchmarks/ppo_limit.py [--precision fp32] [--threads 0]
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import torch

from proclab.envs.actions import NUM_ACTIONS
from proclab.envs.vec_env import ProcgenVecEnv
from proclab.models import build_agent
from proclab.rl.config import preset
from proclab.run.runtime import cpu_name, make_runtime, single_threaded

PIECE_SIZES = (64, 128, 256)  # 512 and more were slower per sample on every CPU tried (docs/ppo.md)
ACTING_BATCH = 64  # the cleanrl preset's envs


class LimitProbe:
    """The ``cleanrl`` agent, random frames and a pool of single-threaded workers, for timing."""

    def __init__(self, precision: str = "fp32", threads: int = 0):
        self.rt = make_runtime("cpu", precision, threads)
        self.threads = torch.get_num_threads()
        torch.set_num_threads(self.threads)  # pins this thread's count before the workers set theirs
        torch.manual_seed(0)
        self.agent = self.rt.prepare(build_agent(preset("cleanrl").agent))
        self.samples = samples = 2 * self.threads * max(PIECE_SIZES)  # two of the largest pieces per worker
        frames = torch.randint(0, 256, (samples, 3, 64, 64), dtype=torch.uint8)
        self.frames = frames.contiguous(memory_format=torch.channels_last)
        self.pool = ThreadPoolExecutor(self.threads, initializer=single_threaded)

    def close(self) -> None:
        self.pool.shutdown()

    def _outputs(self, obs: torch.Tensor):
        n = obs.shape[0]
        with self.rt.autocast():
            out, _ = self.agent.step(obs, {}, torch.zeros(n, dtype=torch.bool), torch.zeros(n))
        return out

    def _learn(self, obs: torch.Tensor) -> None:
        out = self._outputs(obs)
        loss = torch.log_softmax(out.logits.float(), -1).mean() + out.value.float().square().mean()
        torch.autograd.grad(loss, [p for p in self.agent.parameters() if p.requires_grad])

    def _act(self, obs: torch.Tensor) -> None:
        with torch.inference_mode():
            self._outputs(obs)

    def _run(self, fn, batches: list[torch.Tensor], side_by_side: bool) -> None:
        if side_by_side:
            list(self.pool.map(fn, batches))
        else:
            for b in batches:
                fn(b)

    def learner_seconds(self, size: int, side_by_side: bool) -> float:
        """Wall seconds per sample of forward+backward on pieces of ``size`` samples."""
        pieces = list(self.frames.split(size))
        start = time.perf_counter()
        self._run(self._learn, pieces, side_by_side)
        return (time.perf_counter() - start) / self.samples

    def acting_seconds(self, side_by_side: bool, steps: int = 8) -> float:
        """Wall seconds per sample of the acting forward pass on a batch of 64 envs."""
        batch = self.frames[:ACTING_BATCH]
        slices = list(batch.tensor_split(self.threads)) if side_by_side else [batch]
        start = time.perf_counter()
        for _ in range(steps):
            self._run(self._act, slices, side_by_side)
        return (time.perf_counter() - start) / (steps * ACTING_BATCH)


def measure_env(game: str = "starpilot", steps: int = 256) -> float:
    """Wall seconds per env step of the ``cleanrl`` preset's vector env (64 envs, procgen's threads)
    with uniformly random actions: what stepping costs in a training loop, without the agent."""
    cfg = preset("cleanrl")
    env = ProcgenVecEnv(replace(cfg.env, game=(game,)), seed=0)
    actions = np.random.default_rng(0).integers(0, NUM_ACTIONS, (steps + 8, env.num_envs))
    try:
        env.reset()
        for a in actions[:8]:  # warm-up
            env.step(a)
        start = time.perf_counter()
        for a in actions[8:]:
            env.step(a)
        return (time.perf_counter() - start) / (steps * env.num_envs)
    finally:
        env.close()


def measure_limit(
    precision: str = "fp32", threads: int = 0, epochs: int = 3, rounds: int = 5, game: str = "starpilot"
) -> dict:
    """Learner and acting seconds per sample of every scheme and piece size, timed in ``rounds``
    interleaved rounds; the SPS limit for ``epochs`` learner passes per sample from the best scheme's
    *median* round, and that limit with env stepping. The median, because one pass's time varies by
    +-10 % on a quiet machine, and the fastest of several noisy timings is a limit no training loop,
    which pays every pass, reaches (the fastest rounds give ``limit_fastest_sps``, for comparison)."""
    probe = LimitProbe(precision, threads)
    learner: dict[str, list[float]] = {}
    acting: dict[str, list[float]] = {}
    try:
        for size in PIECE_SIZES:  # warm-up (allocator, oneDNN primitives) in this thread and the workers
            pieces = list(probe.frames[: size * probe.threads].split(size))
            probe._run(probe._learn, pieces[:1], side_by_side=False)
            probe._run(probe._learn, pieces, side_by_side=True)
        for _ in range(rounds):
            for scheme, side in (("intra", False), ("workers", True)):
                for size in PIECE_SIZES:
                    key = f"{scheme}_{size}"
                    learner.setdefault(key, []).append(probe.learner_seconds(size, side))
                acting.setdefault(scheme, []).append(probe.acting_seconds(side))
    finally:
        probe.close()
    median = {k: float(np.median(v)) for k, v in learner.items()}
    median_acting = {k: float(np.median(v)) for k, v in acting.items()}
    best_learner = min(median, key=median.get)
    best_acting = min(median_acting, key=median_acting.get)
    seconds = epochs * median[best_learner] + median_acting[best_acting]
    fastest = epochs * min(map(min, learner.values())) + min(map(min, acting.values()))
    env = measure_env(game)
    return {
        "precision": precision,
        "threads": probe.threads,
        "rounds": rounds,
        "learner_ms_per_sample": {k: round(v * 1e3, 3) for k, v in median.items()},
        "acting_ms_per_sample": {k: round(v * 1e3, 3) for k, v in median_acting.items()},
        "env_ms_per_sample": round(env * 1e3, 4),
        "best_learner": best_learner,
        "best_acting": best_acting,
        "limit_sps": round(1 / seconds, 1),
        "limit_with_env_sps": round(1 / (seconds + env), 1),
        "limit_fastest_sps": round(1 / fastest, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", default="fp32", help="fp32 or bf16 (autocast, as the learner runs it)")
    parser.add_argument(
        "--threads", type=int, default=0, help="torch threads = workers (0 = torch's default)"
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="interleaved rounds over all schemes; each one's median counts"
    )
    parser.add_argument("--game", default="starpilot", help="the game whose env stepping is timed")
    args = parser.parse_args()
    line = measure_limit(args.precision, args.threads, rounds=args.rounds, game=args.game)
    print(json.dumps({"benchmark": "ppo_limit", "cpu": cpu_name(), "preset": "cleanrl", **line}))


if __name__ == "__main__":
    main()
