"""Intervention sweep speed: all (direction, arm) variants batched, against the arms run one by one.

One run measures, on the same agent, basis and game:

* ``batched``: the sweep as ``analyze intervene --sweep`` plays it: ``--directions`` directions x
  the four on-data arms (mean, resample, p05, p95) + the baseline on ``--levels`` paired levels,
  every episode in flight in one env of ``--rows`` slots and one batched agent forward per step;
  then its statistics (bootstrap CIs, permutation p-values, Holm);
* ``sequential``: the same variants evaluated one after another, as running ``analyze intervene``
  once per (direction, arm) did: each variant alone on ``--sequential-levels`` levels (a smaller
  set, so this part stays short) with ``--sequential-envs`` env slots (that command's default 16).

Both use the same player, so the ratio is that of batching alone. Lines (JSON):

    {"mode": "batched", "variants": 17, "levels": 200, "episodes": ..., "steps": ...,
     "play_s": ..., "steps_per_s": ..., "stats_s": ..., ...}
    {"mode": "sequential", ..., "steps_per_s": ...}
    {"mode": "ratio", "steps_per_s": <batched / sequential>, "s_per_episode": <sequential / batched>}

The agent is ``--checkpoint`` (a proclab checkpoint, e.g. an imported one) or, by default, the seed's
CoinRun architecture (``interp-gru``) freshly initialised on ``--game`` (CoinRun hard); the basis (PCA + FastICA,
``--directions`` ICs) is fitted on its states over ``--basis-steps`` steps of 32 envs. The speed
depends on the episode lengths the agent produces, so they are printed too. Quick run on a CPU:

    python benchmarks/intervene_sweep.py --directions 4 --levels 40 --sequential-levels 8
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from proclab.envs import EnvConfig, ProcgenVecEnv, distinct_levels, parse_split
from proclab.interpret.bases.coordinates import LinearCoordinates
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.interventions.arms import Recorded
from proclab.interpret.interventions.batched_play import Outcomes, ProcgenLevels, play
from proclab.interpret.sweep.grid import SweepSettings, Variants, sweep
from proclab.interpret.sweep.plan import SweepPlan
from proclab.models import agent_preset, build_agent
from proclab.models.edited import Intervened
from proclab.models.loading import freeze, load_agent
from proclab.run.runtime import cpu_name, make_runtime

ARMS = "mean,resample,p05,p95"
KEY = "core.0.h"


def agent_and_env(args, rt):
    if args.checkpoint:
        agent, env_config, _ = load_agent(args.checkpoint, rt)
        return agent, env_config
    torch.manual_seed(0)
    agent = freeze(rt.prepare(build_agent(agent_preset("interp-gru"))))
    return agent, EnvConfig(game=(args.game,), mode=args.mode, num_envs=32)


@torch.inference_mode()
def states(agent, env_config, steps: int, rt) -> np.ndarray:
    """The agent's state leaving every step of 32 envs over ``steps`` steps (greedy), for the basis."""
    env = ProcgenVecEnv(replace(env_config, num_envs=32), seed=1, split="train")
    obs, _ = env.reset()
    state, first, rows = agent.initial_state(32, device=rt.device), torch.ones(32, dtype=torch.bool), []
    for _ in range(steps):
        out, state = agent.step(rt.obs_tensor(obs), state, first)
        rows.append(state[KEY].reshape(32, -1).float().cpu().numpy())
        obs, _, terminated, truncated, _ = env.step(out.logits.argmax(1).cpu().numpy())
        first = torch.from_numpy(terminated | truncated)
    env.close()
    return np.concatenate(rows)


def fitted(args, rt):
    """The agent, its env, the states it visited and an ICA basis of ``args.directions`` fitted on them."""
    agent, env_config = agent_and_env(args, rt)
    x = states(agent, env_config, args.basis_steps, rt)
    basis = Basis.fit(x, BasisConfig(n_ics=args.directions), {"activation": f"state_out/{KEY}"})
    return agent, env_config, x, basis, LinearCoordinates(basis, "ica")


def row(mode: str, played: float, out, variants: int, levels: int, **extra) -> dict:
    steps = int(out.length.sum())
    return {
        "mode": mode,
        "variants": variants,
        "levels": levels,
        "episodes": int(out.length.size),
        "steps": steps,
        "mean_length": round(float(out.length.mean()), 1),
        "play_s": round(played, 3),
        "steps_per_s": round(steps / played, 1),
        "s_per_episode": round(played / out.length.size, 5),
        **extra,
    }


def batched(agent, coords, rec, env_config, directions, args, rt, common) -> dict:
    """The sweep as ``analyze intervene --sweep`` plays and tests it."""
    levels = distinct_levels(parse_split(args.split), args.levels, 0)
    sweep_args = SweepSettings(arms=ARMS, levels=args.levels, rows=args.rows, split=args.split)
    V = 1 + len(directions) * len(ARMS.split(","))
    env = ProcgenLevels(env_config, min(args.rows, V * len(levels)), 0)
    print(f"batched: {V} variants x {len(levels)} levels ...", file=sys.stderr)
    t0 = time.perf_counter()
    summary, out, _ = sweep(agent, coords, KEY, rec, env, levels, directions, sweep_args, rt)
    total = time.perf_counter() - t0
    env.close()
    stats_s = round(total - summary["play_seconds"], 3)
    return row(
        "batched", summary["play_seconds"], out, V, len(levels), rows=env.num_envs, stats_s=stats_s, **common
    )


def sequential(agent, coords, rec, env_config, directions, args, rt, common) -> dict:
    """The same variants one evaluation each, on fewer levels, with the single command's env slots."""
    small = distinct_levels(parse_split(args.split), args.sequential_levels, 1)
    variants = Variants.of(directions, tuple(ARMS.split(",")), rec, len(small), 0)
    held, plan = Intervened(agent, count_steps=True), SweepPlan(coords, KEY, rec.values)
    env = ProcgenLevels(env_config, min(args.sequential_envs, len(small)), 0)
    V = len(variants.arm)
    print(f"sequential: {V} variants one by one x {len(small)} levels ...", file=sys.stderr)
    played, parts = 0.0, []
    for v in range(V):
        t0 = time.perf_counter()
        parts.append(
            play(held, plan, env, small, variants.direction[v : v + 1], variants.values[v : v + 1], rt)
        )
        played += time.perf_counter() - t0
    env.close()
    fields = ("ret", "complete", "length", "actions")
    joined = Outcomes(*(np.concatenate([getattr(o, f) for o in parts]) for f in fields))
    return row("sequential", played, joined, V, len(small), rows=env.num_envs, **common)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", type=Path, default=None, help="agent (default: untrained interp-gru)")
    p.add_argument("--directions", type=int, default=16, help="ICs swept (k)")
    p.add_argument("--levels", type=int, default=200, help="paired levels of the batched sweep")
    p.add_argument("--rows", type=int, default=256, help="episodes in flight in the batched sweep")
    p.add_argument("--sequential-levels", type=int, default=20, help="levels per sequential evaluation")
    p.add_argument("--sequential-envs", type=int, default=16, help="env slots per sequential evaluation")
    p.add_argument(
        "--game", default="coinrun", help="game of the untrained agent (a checkpoint brings its own)"
    )
    p.add_argument("--mode", default="hard", help="distribution mode of the untrained agent's game")
    p.add_argument("--split", default="test1")
    p.add_argument("--basis-steps", type=int, default=200, help="steps of 32 envs the basis is fitted on")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = p.parse_args(argv)
    rt = make_runtime(args.device, "fp32", args.threads)
    agent, env_config, x, basis, coords = fitted(args, rt)
    start = coords.encode(agent.initial_state(1)[KEY].reshape(1, -1).double().cpu())[0].numpy()
    rec = Recorded(basis.to_ics(x), start)
    directions = list(range(args.directions))
    common = {
        "device": str(rt.device),
        "threads": torch.get_num_threads(),
        "cpu": cpu_name(),
        "game": env_config.games()[0],
    }
    fast = batched(agent, coords, rec, env_config, directions, args, rt, common)
    print(json.dumps(fast), flush=True)
    slow = sequential(agent, coords, rec, env_config, directions, args, rt, common)
    print(json.dumps(slow), flush=True)
    ratio = {
        "mode": "ratio",
        "steps_per_s": round(fast["steps_per_s"] / slow["steps_per_s"], 2),
        "s_per_episode": round(slow["s_per_episode"] / fast["s_per_episode"], 2),
        **common,
    }
    print(json.dumps(ratio), flush=True)


if __name__ == "__main__":
    main()
