"""Steps/s of proclab's ProcgenVecEnv against raw procgen, measured side by side.

The baseline is procgen's own gym3 env driven the cheapest documented way (``act`` then
``observe``, which copies the observation like proclab does; ``--raw-get-info`` adds gym3's
``get_info`` that a real loop needs for level seeds). proclab adds the channels-first view,
episode statistics, level seeds and the terminated/truncated split on top. Prints one
JSON line per (game, num_envs) with both rates and their ratio; the target is ratio >= 0.9 at
64 envs. Rounds alternate between the two so that machine noise hits both alike.

    python benchmarks/env_throughput.py [--games starpilot coinrun] [--num-envs 1 16 64] [--steps 2000]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs._backend_gym3 import ProcgenGym3Env  # raw procgen through gym3 (Python 3.11, 3.12)


def raw_rate(game: str, n: int, actions: np.ndarray, get_info: bool) -> float:
    env = ProcgenGym3Env(
        num=n, env_name=game, distribution_mode="easy", num_levels=200, start_level=0, rand_seed=0
    )
    env.observe()
    start = time.perf_counter()
    for a in actions:
        env.act(a)
        env.observe()
        if get_info:
            env.get_info()
    rate = actions.size / (time.perf_counter() - start)
    env.close()
    return rate


def proclab_rate(game: str, n: int, actions: np.ndarray) -> float:
    env = ProcgenVecEnv(EnvConfig(game=(game,), num_envs=n), seed=0)
    env.reset()
    start = time.perf_counter()
    for a in actions:
        env.step(a)
    rate = actions.size / (time.perf_counter() - start)
    env.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=["starpilot", "coinrun"])
    parser.add_argument("--num-envs", nargs="+", type=int, default=[1, 16, 64])
    parser.add_argument("--steps", type=int, default=2000, help="vector steps per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the best of each is kept")
    parser.add_argument(
        "--raw-get-info",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="include gym3 get_info() in the raw loop (needed for level seeds)",
    )
    args = parser.parse_args()
    for game in args.games:
        for n in args.num_envs:
            actions = np.random.default_rng(0).integers(0, 15, (args.steps, n)).astype(np.int32)
            raw, ours = [], []
            for _ in range(args.rounds):
                raw.append(raw_rate(game, n, actions, args.raw_get_info))
                ours.append(proclab_rate(game, n, actions))
            print(
                json.dumps(
                    {
                        "benchmark": "env_throughput",
                        "game": game,
                        "num_envs": n,
                        "raw_steps_per_s": round(max(raw)),
                        "proclab_steps_per_s": round(max(ours)),
                        "ratio": round(max(ours) / max(raw), 3),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
