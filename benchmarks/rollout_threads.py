"""Seconds of one ``proclab.rollout`` with a cache at each intra-op thread count, and proclab's default.

``rollout`` acts on batches of at most ``num_envs`` frames, one forward pass per env step, with procgen's
stepping threads in the same process. Small forward passes on several intra-op threads pay a barrier per
operation, and on a busy CPU a descheduled thread stalls the rest; this measures what that costs. Each
line is one setting, played on the same levels with the same seed (the numbers of the rollouts agree):

* ``threads=N``: ``proclab.rollout(..., threads=N)``, torch's intra-op threads while playing (N is 1, 2
  and the process's own count: what a notebook computed with before rollout chose for it);
* ``default``: ``proclab.rollout`` as a user calls it (its own choice, :func:`proclab.run.runtime.acting_threads`);
* ``ratio``: seconds over the best ``threads=N`` of this run (the issue's bar: the default within 1.3x).

Each setting runs ``--repeats`` times, in turn with the others, and reports its fastest (the least
disturbed by whatever else the machine does).

    python benchmarks/rollout_threads.py --episodes 32 --hooks torso.block1.hook_out core.0.hook_h
"""

from __future__ import annotations

import argparse
import json
import time

import torch

import proclab
from proclab.models.config import agent_preset
from proclab.run.runtime import cpu_has_native_bf16, cpu_name


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--agent",
        default=None,
        help="an agent for proclab.load (default: the seed's "
        "CoinRun architecture, interp-gru, randomly initialised)",
    )
    parser.add_argument("--game", default="coinrun")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--hooks", nargs="+", default=["torso.block1.hook_out", "core.0.hook_h"])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    own = torch.get_num_threads()
    if args.agent:
        agent = proclab.load(args.agent, precision="fp32")
    else:
        torch.manual_seed(0)
        agent = proclab.build_agent(agent_preset("interp-gru")).eval()
    counts = sorted({1, 2, own})

    def play(threads: int | None = None) -> float:
        start = time.perf_counter()
        ro = proclab.rollout(
            agent, game=args.game, levels="1000:200", episodes=args.episodes, cache=args.hooks, seed=0,
            threads=threads,
        )  # fmt: skip
        assert ro.num_episodes == args.episodes
        return time.perf_counter() - start

    best: dict[str, float] = {}
    for _ in range(args.repeats):
        for n in counts:
            best[f"threads={n}"] = min(best.get(f"threads={n}", float("inf")), play(n))
        best["default"] = min(best.get("default", float("inf")), play())
    fastest = min(v for k, v in best.items() if k != "default")
    for setting, seconds in best.items():
        print(
            json.dumps(
                {
                    "bench": "rollout_threads",
                    "setting": setting,
                    "seconds": round(seconds, 2),
                    "ratio": round(seconds / fastest, 2),
                    "episodes": args.episodes,
                    "hooks": args.hooks,
                    "torch_default_threads": own,
                    "cpu": cpu_name(),
                    "native_bf16": cpu_has_native_bf16(),
                }
            )
        )


if __name__ == "__main__":
    main()
