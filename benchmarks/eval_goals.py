"""The cost of both goals per episode in ``proclab eval``: episodes per second with and without them, one run.

``proclab eval`` plays the same agent on the same levels with the same seed twice per round, once plain and
once with ``goals=True`` (:class:`proclab.envs.state.GoalTracker`: every env slot's ``get_state`` after
every step, the agent's box read from it, one full parse per episode), in rounds that alternate which
goes first, after one untimed warm-up episode (procgen's first env loads its assets); each variant's best
round is kept (bursts of contention on a shared machine hit both alike).
``ratio`` is the goals run's wall-clock time over the plain one's: the slowdown; ``cpu_ratio`` the same for
the CPU time of the process (all threads), steadier on a shared machine. Both runs play the same
episodes, so their returns agree (checked). Default: the interpreting-rl-behavior CoinRun agent (a cached
registry agent, or its checkpoint file), CoinRun hard, its test levels; ``--uniform`` plays a uniformly
random agent instead (no network: the largest share the goals can take of the time)::

    python benchmarks/eval_goals.py --agent /work/agents/model_78053376.pth --episodes 64 --rounds 3
    python benchmarks/eval_goals.py --uniform --episodes 64 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import time

import torch

import proclab
from proclab.envs import EnvConfig
from proclab.models.scripted import ScriptedAgent
from proclab.rl.evaluate import evaluate
from proclab.run.runtime import make_runtime


def timed(
    agent, config, runtime, episodes: int, envs: int, seed: int, goals: bool
) -> tuple[float, float, dict]:
    """Wall-clock and CPU seconds of one evaluation, and its summary."""
    torch.manual_seed(seed)
    wall, cpu = time.perf_counter(), time.process_time()
    res = evaluate(agent, config, "test1", episodes, runtime, envs_per_game=envs, seed=seed, goals=goals)
    return (
        time.perf_counter() - wall,
        time.process_time() - cpu,
        next(iter(res.values())).summary(config.mode),
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--agent", default="coinrun/interpreting-rl-behavior", help="a registry name, run or checkpoint file"
    )
    p.add_argument("--episodes", type=int, default=64)
    p.add_argument("--envs", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--uniform", action="store_true", help="a uniformly random agent on CoinRun hard")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.uniform:
        agent, config = ScriptedAgent.uniform(15), EnvConfig(game=("coinrun",), mode="hard")
        runtime = make_runtime("cpu", "fp32")
    else:
        agent = proclab.load(args.agent)
        config, runtime = agent.env_config, agent.runtime
    timed(agent, config, runtime, 1, 1, args.seed, True)  # procgen's first env loads its assets: not timed
    best = {False: float("inf"), True: float("inf")}
    best_cpu = dict(best)
    for r in range(args.rounds):
        summaries = {}
        for goals in (False, True) if r % 2 == 0 else (True, False):
            seconds, summaries[goals] = timed(
                agent, config, runtime, args.episodes, args.envs, args.seed, goals
            )
            best[goals] = min(best[goals], seconds)
            print(json.dumps({"round": r, "goals": goals, "seconds": round(seconds, 3)}), flush=True)
        assert summaries[False]["return_mean"] == summaries[True]["return_mean"], (
            "the two runs played differently"
        )
    print(
        json.dumps(
            {
                "benchmark": "eval_goals",
                "agent": "uniform" if args.uniform else args.agent,
                "game": config.game,
                "mode": config.mode,
                "episodes": args.episodes,
                "envs": args.envs,
                "rounds": args.rounds,
                "plain_s": round(best[False], 3),
                "goals_s": round(best[True], 3),
                "ratio": round(best[True] / best[False], 4),
                "plain_cpu_s": round(best_cpu[False], 3),
                "goals_cpu_s": round(best_cpu[True], 3),
                "cpu_ratio": round(best_cpu[True] / best_cpu[False], 4),
                "goals": summaries[True].get("goals"),
            }
        )
    )


if __name__ == "__main__":
    main()
