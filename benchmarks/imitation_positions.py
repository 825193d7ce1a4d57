"""What the position heads of imitation buy: the same student, data and batches with and without them.

Gathers ``--frames`` frames of the cheese planner on easy mazes (its training levels, 0.25 of its steps
random, the cheese in the top-right 5 x 5 cells as ``maze/small`` trains) and ``--held-out`` (4,096) on held-out mazes, then
trains two students from the same initialisation on the same batches, one with ``position_coef`` 0 and one with
1, and prints a JSON line every ``--every`` batches: the held-out agreement with the planner (the student's
most likely action is the planner's), beside the share of the commonest action (what a student that ignores
the frame scores)::

    python benchmarks/imitation_positions.py --frames 100000 --batches 600
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

import numpy as np
import torch

from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.models.agent import build_agent
from proclab.models.planners import planner
from proclab.rl.imitation import ImitationConfig, PositionHeads, gather, losses
from proclab.run.runtime import cpu_has_native_bf16


def frames_of(split: str, frames: int, seed: int, runtime):
    env = ProcgenVecEnv(EnvConfig(game=("maze",), split=split, level_rule="cheese-region:size=5"), seed=seed)
    got, _ = gather(
        env, planner("cheese-planner", "maze"), frames, np.random.default_rng(seed), runtime, explore=0.25
    )
    env.close()
    return got


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=600)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--held-out", type=int, default=4096, help="frames of held-out mazes")
    parser.add_argument("--precision", default="auto")
    args = parser.parse_args()
    config = replace(ImitationConfig(), precision=args.precision)
    runtime = config.runtime()
    train = frames_of("train-1m", args.frames, 1, runtime)
    held = frames_of("1000000:5000", args.held_out, 2, runtime)
    commonest = float(np.bincount(held.actions).max() / len(held.actions))
    obs, actions, cells = (torch.from_numpy(a) for a in (held.obs, held.actions, held.cells))
    order = torch.randperm(len(train.actions), generator=torch.Generator().manual_seed(0))
    for coef in (0.0, 1.0):
        torch.manual_seed(0)
        agent = runtime.prepare(build_agent(config.agent))
        heads = PositionHeads(config.agent.fc)
        optimizer = torch.optim.Adam([*agent.parameters(), *heads.parameters()], lr=config.lr)
        started = time.perf_counter()
        for batch in range(1, args.batches + 1):
            rows = order[(batch - 1) * config.batch % len(order) :][: config.batch]
            a, p, _ = losses(
                agent, heads, torch.from_numpy(train.obs[rows]), torch.from_numpy(train.actions[rows]),
                torch.from_numpy(train.cells[rows]), runtime,
            )  # fmt: skip
            optimizer.zero_grad(set_to_none=True)
            (a + coef * p).backward()
            optimizer.step()
            if batch % args.every == 0:
                with torch.no_grad():
                    _, held_position, agreement = losses(agent, heads, obs, actions, cells, runtime)
                row = {"position_coef": coef, "batches": batch, "held_out_agreement": round(float(agreement), 4),
                       "held_out_position_loss": round(float(held_position), 4), "commonest_action": round(commonest, 4),
                       "seconds": round(time.perf_counter() - started, 1), "bf16": runtime.bf16,
                       "cpu_native_bf16": cpu_has_native_bf16()}  # fmt: skip
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
