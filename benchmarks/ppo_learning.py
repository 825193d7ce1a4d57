"""Does PPO learn? Train a preset for a budget, then compare with a uniformly random agent.

Trains ``--preset`` on ``--game`` for ``--total-steps``, evaluates the final checkpoint and a
uniform-random policy on the training split and a held-out test split with the same
unbiased-quota protocol as ``proclab eval``, and prints one JSON line per (agent, split) with
mean return, its standard error and the normalised score, plus the wall-clock.

``--precisions bf16 fp32`` trains the same seed once per precision and also writes an overlay
of their curves (``--out``), the check that bf16 autocast does not change learning.

    python benchmarks/ppo_learning.py --preset tiny --game starpilot --total-steps 200000
    python benchmarks/ppo_learning.py --preset cleanrl --game starpilot --total-steps 25000000 --device cuda
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from proclab.envs import NUM_ACTIONS
from proclab.models import AgentOutput
from proclab.models.loading import load_agent
from proclab.rl.config import preset
from proclab.rl.evaluate import evaluate
from proclab.rl.ppo_train import Trainer
from proclab.run.runtime import make_runtime


class UniformAgent(nn.Module):
    """The random baseline: equal logits for every action, no state."""

    def initial_state(self, batch, device=None):
        return {}

    def step(self, obs, state, first, prev_reward=None):
        zeros = torch.zeros(obs.shape[0], device=obs.device)
        return AgentOutput(zeros.unsqueeze(1).expand(-1, NUM_ACTIONS), zeros), state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--game", default="starpilot")
    parser.add_argument("--total-steps", type=int, default=200_000)
    parser.add_argument("--episodes", type=int, default=100, help="evaluation episodes per split")
    parser.add_argument("--test-split", default="test1")
    parser.add_argument("--precisions", nargs="+", default=["auto"])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--run-root", type=Path, default=Path("runs/benchmarks"))
    parser.add_argument(
        "--out", type=Path, default=Path("ppo_learning.png"), help="curve overlay (several precisions)"
    )
    args = parser.parse_args()

    base = preset(args.preset)
    runs = []
    for precision in args.precisions:
        cfg = replace(
            base,
            env=replace(base.env, game=(args.game,)),
            ppo=replace(base.ppo, total_steps=args.total_steps),
            precision=precision,
            device=args.device,
            seed=args.seed,
            run_root=args.run_root,
            name=f"{args.preset}-{precision}",
        )
        start = time.time()
        run = Trainer(cfg).train(progress=False)
        minutes = (time.time() - start) / 60
        runs.append(run)
        rt = make_runtime(args.device, precision)
        agent, env_config, _ = load_agent(run, rt)
        for name, policy in (("ppo", agent), ("random", UniformAgent())):
            for split in (env_config.split, args.test_split):
                res = evaluate(policy, env_config, split, args.episodes, rt, seed=args.seed + 7)[args.game]
                s = res.summary(env_config.mode)
                print(
                    json.dumps(
                        {
                            "benchmark": "ppo_learning",
                            "preset": args.preset,
                            "game": args.game,
                            "precision": precision,
                            "steps": args.total_steps,
                            "train_minutes": round(minutes, 1),
                            "agent": name,
                            "split": split,
                            "episodes": s["episodes"],
                            "return_mean": round(s["return_mean"], 3),
                            "return_sem": round(s["return_sem"], 3),
                            "normalized_score": round(s["normalized_score"], 4),
                            "run": str(run),
                        }
                    ),
                    flush=True,
                )
    if len(runs) > 1:
        from proclab.rl.curves import plot_runs

        print(json.dumps({"benchmark": "ppo_learning", "curves": str(plot_runs(runs, args.out))}))


if __name__ == "__main__":
    main()
