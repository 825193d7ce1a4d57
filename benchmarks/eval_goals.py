"""The cost of both goals per episode in ``proclab eval``: episodes per second with and without them, one run.

``proclab eval`` plays the same agent on the same levels with the same seed twice per round, once plain and
once with ``goals=True`` (:class:`proclab.envs.state.GoalTracker`: every env slot's ``get_state`` after
every step, the agent's box read from it, one full parse per episode), in rounds that alternate which
goes first, after one untimed warm-up episode (procgen's first env loads its assets); each variant's best
round is kept (bursts of contention on a shared machine hit both alike). A last line times the parts per
env slot and step on 16 CoinRun envs stepped at random: procgen's step, its ``get_state`` (which the goals
need) and the tracker's read, beside the recorder's ground-truth reader (``GameTruth.see``) on the same states.
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

import numpy as np
import torch

import proclab
from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs.state import GoalTracker
from proclab.models.scripted import ScriptedAgent
from proclab.record.ground_truth import GameTruth
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


def parts(steps: int = 300, envs: int = 16) -> dict:
    """Microseconds per env slot and step of procgen's step, its get_state, the goal tracker and the
    recorder's ground-truth reader, on CoinRun hard stepped at random."""
    config = EnvConfig(game=("coinrun",), mode="hard", num_envs=envs, num_threads=1)
    rng = np.random.default_rng(0)
    clock = dict.fromkeys(("step", "get_state", "goal_tracker", "ground_truth_reader"), 0.0)
    truth = GameTruth("coinrun")
    with ProcgenVecEnv(config, seed=0) as env:
        env.reset()
        tracker = GoalTracker(env.games, env.game_index, env.slot_states())
        for _ in range(steps):
            t0 = time.perf_counter()
            _, _, terminated, truncated, info = env.step(rng.integers(0, 15, envs))
            t1 = time.perf_counter()
            states = env.slot_states()
            t2 = time.perf_counter()
            tracker.step(states, terminated | truncated, info["episode"]["level_complete"])
            t3 = time.perf_counter()
            truth.see(states, keys=list(range(envs)))
            t4 = time.perf_counter()
            for name, seconds in zip(clock, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                clock[name] += seconds
    return {f"{name}_us": round(1e6 * seconds / (steps * envs), 1) for name, seconds in clock.items()}


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
            seconds, cpu, summaries[goals] = timed(
                agent, config, runtime, args.episodes, args.envs, args.seed, goals
            )
            best[goals], best_cpu[goals] = min(best[goals], seconds), min(best_cpu[goals], cpu)
            row = {"round": r, "goals": goals, "seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3)}
            print(json.dumps(row), flush=True)
        assert summaries[False]["return_mean"] == summaries[True]["return_mean"], (
            "the two runs played differently"
        )
    print(json.dumps({"benchmark": "eval_goals_parts", "game": "coinrun", "mode": "hard", **parts()}))
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
