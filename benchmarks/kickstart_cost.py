"""What kickstarting costs when acting: rollouts collected with a planner labelling every state against the
same rollouts without it, side by side.

Per game, the quickstart preset's agent acts on ``--num-envs`` envs (its level rule, one torch thread) and
fills rollouts of ``--num-steps`` steps; every other round passes ``teacher=`` (the game's planner, which reads
each slot's game state and plans: a breadth-first search of the maze, CoinRun's look-ahead), so machine noise hits
both alike. The learner's extra work (one gather and one mean per minibatch) is not timed. Prints one JSON line
per game: both rates (env steps/s), their ratio, and the planner's cost per slot-step.

    python benchmarks/kickstart_cost.py [--games coinrun maze] [--num-envs 32] [--num-steps 32] [--rounds 6]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from proclab.envs import ProcgenVecEnv
from proclab.envs.rules import with_rule
from proclab.models import build_agent
from proclab.models.planners import planner
from proclab.rl.config import preset
from proclab.rl.rollout import Actor, Rollout
from proclab.run.runtime import make_runtime, torch_threads

TEACHERS = {"coinrun": ("coin-planner", ""), "maze": ("cheese-planner", "cheese-region:size=5")}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--games", nargs="+", default=list(TEACHERS), choices=list(TEACHERS))
    ap.add_argument("--num-envs", type=int, default=32)
    ap.add_argument("--num-steps", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=6, help="rounds of each kind, alternating")
    args = ap.parse_args(argv)
    with torch_threads(1):
        measure(args)


def measure(args: argparse.Namespace) -> None:
    cfg = preset("quickstart")
    rt = make_runtime("cpu", "fp32")
    for game in args.games:
        name, rule = TEACHERS[game]
        env_cfg = with_rule(replace(cfg.env, game=(game,), num_envs=args.num_envs), rule or None)
        actor = Actor(ProcgenVecEnv(env_cfg, seed=0), rt.prepare(build_agent(cfg.agent)), rt)
        rollout = Rollout.allocate(args.num_steps, args.num_envs, rt.device)
        teacher = planner(name, game)
        seconds = {"plain": 0.0, "teacher": 0.0}
        actor.collect(rollout)  # warm-up
        for r in range(2 * args.rounds):
            kind = "teacher" if r % 2 else "plain"
            start = time.perf_counter()
            actor.collect(rollout, teacher=teacher if kind == "teacher" else None)
            seconds[kind] += time.perf_counter() - start
        steps = args.rounds * args.num_envs * args.num_steps
        plain, taught = steps / seconds["plain"], steps / seconds["teacher"]
        row = {
            "game": game, "teacher": name, "num_envs": args.num_envs, "steps_each": steps,
            "collect_sps_plain": round(plain, 1), "collect_sps_teacher": round(taught, 1),
            "ratio": round(taught / plain, 3),
            "planner_ms_per_slot_step": round(1000 * (seconds["teacher"] - seconds["plain"]) / steps, 4),
        }  # fmt: skip
        print(json.dumps(row), flush=True)
        actor.close()


if __name__ == "__main__":
    main()
