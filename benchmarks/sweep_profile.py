"""Where an intervention sweep's time goes, and its throughput as a fraction of the agent's raw acting.

One run, on the same agent, basis, game, slots and threads:

* ``raw``: the plain agent acting greedily in a Procgen vector env of ``--rows`` slots (its forward in
  the sweep's CPU pieces of ``CPU_CHUNK`` rows), no edit and no bookkeeping: the ceiling;
* ``sweep``: :func:`proclab.interpret.interventions.batched_play.play` of ``--directions`` ICs x the
  four on-data arms + the baseline on ``--levels`` paired levels, with its time split into env
  stepping (``step``, ``observe``, loading level states), the edited agent's forward (``_forward``:
  encode, hold, write back, the network), deaths by cause in a game that names its hazards (the
  watcher and the replays of the deaths, as the sweep command runs them) and the rest (bookkeeping:
  slots, action choice, totals);
* ``fraction``: sweep steps/s over raw steps/s.

Lines (JSON): ``{"mode": "raw", "steps_per_s", "env_s", "forward_s", ...}``, ``{"mode": "sweep", ...,
"bookkeeping_s"}``, ``{"mode": "fraction", "sweep_over_raw"}``. Quick run on a CPU:

    python benchmarks/sweep_profile.py --directions 2 --levels 4 --rows 36 --raw-steps 300 --threads 1
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace

import numpy as np
import torch

from intervene_sweep import ARMS, KEY, fitted
from proclab.envs import ProcgenVecEnv, distinct_levels, parse_split
from proclab.envs.state import glossary
from proclab.interpret.interventions import batched_play
from proclab.interpret.interventions.arms import Recorded
from proclab.interpret.interventions.batched_play import ProcgenLevels, play
from proclab.interpret.sweep.deaths import Deaths
from proclab.interpret.sweep.grid import Variants
from proclab.interpret.sweep.plan import SweepPlan
from proclab.models.edited import Intervened
from proclab.run.runtime import cpu_name, make_runtime


class Clock:
    """Seconds spent inside wrapped callables, by name."""

    def __init__(self):
        self.spent: dict[str, float] = {}

    def wrap(self, name: str, fn):
        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.spent[name] = self.spent.get(name, 0.0) + time.perf_counter() - t0

        return timed


@torch.inference_mode()
def raw(agent, env_config, rows: int, steps: int, rt) -> dict:
    env = ProcgenVecEnv(replace(env_config, num_envs=rows), seed=2, split=parse_split("test1"))
    obs, _ = env.reset()
    state, first = agent.initial_state(rows, device=rt.device), torch.ones(rows, dtype=torch.bool)
    env_s = forward_s = 0.0
    for _ in range(steps):
        t0 = time.perf_counter()
        logits, parts = [], []
        for lo in range(0, rows, batched_play.CPU_CHUNK):
            sl = slice(lo, lo + batched_play.CPU_CHUNK)
            with rt.autocast():  # the sweep's precision
                out, new = agent.step(rt.obs_tensor(obs[sl]), {k: v[sl] for k, v in state.items()}, first[sl])
            logits.append(out.logits)
            parts.append(new)
        state = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
        act = torch.cat(logits).argmax(1).cpu().numpy()
        t1 = time.perf_counter()
        obs, _, terminated, truncated, _ = env.step(act)
        first = torch.from_numpy(terminated | truncated)
        env_s, forward_s = env_s + time.perf_counter() - t1, forward_s + t1 - t0
    env.close()
    total = env_s + forward_s
    return {"mode": "raw", "rows": rows, "steps": steps * rows, "seconds": round(total, 3),
            "steps_per_s": round(steps * rows / total, 1), "env_s": round(env_s, 3), "forward_s": round(forward_s, 3)}  # fmt: skip


def profiled_sweep(agent, coords, rec, env_config, args, rt) -> dict:
    levels = distinct_levels(parse_split("test1"), args.levels, 0)
    variants = Variants.of(list(range(args.directions)), tuple(ARMS.split(",")), rec, len(levels), 0)
    env = ProcgenLevels(env_config, args.rows, 0)
    clock = Clock()
    for name in ("step", "observe", "load", "level_state"):
        setattr(env, name, clock.wrap("env", getattr(env, name)))
    plain_forward = batched_play._forward
    batched_play._forward = clock.wrap("forward", plain_forward)
    deaths = None
    if glossary(env_config.games()[0]).hazards:
        deaths = Deaths(env.replay, env_config.games()[0]).start(len(variants.arm), levels)
        deaths.classify = clock.wrap("deaths", deaths.classify)
    try:
        t0 = time.perf_counter()
        watch = None if deaths is None else clock.wrap("deaths", deaths)
        out = play(
            Intervened(agent, count_steps=True),
            SweepPlan(coords, KEY, rec.values),
            env,
            levels,
            variants.direction,
            variants.values,
            rt,
            watch=watch,
        )
        if deaths is not None:
            deaths.classify(out.complete, out.timed_out)
        total = time.perf_counter() - t0
    finally:
        batched_play._forward = plain_forward
        env.close()
    steps = int(out.length.sum())
    env_s, forward_s, deaths_s = (clock.spent.get(k, 0.0) for k in ("env", "forward", "deaths"))
    return {"mode": "sweep", "rows": args.rows, "variants": len(variants.arm), "levels": len(levels),
            "episodes": int(out.length.size), "steps": steps, "seconds": round(total, 3),
            "steps_per_s": round(steps / total, 1), "env_s": round(env_s, 3), "forward_s": round(forward_s, 3),
            "deaths_s": round(deaths_s, 3), "bookkeeping_s": round(total - env_s - forward_s - deaths_s, 3)}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default=None, help="agent (default: untrained interp-gru)")
    p.add_argument("--directions", type=int, default=4)
    p.add_argument("--levels", type=int, default=16)
    p.add_argument("--rows", type=int, default=256)
    p.add_argument("--raw-steps", type=int, default=200, help="steps of the raw-acting env (x rows)")
    p.add_argument("--game", default="coinrun")
    p.add_argument("--mode", default="hard")
    p.add_argument("--basis-steps", type=int, default=100)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--precision", default="fp32", help="fp32, bf16 or auto (the sweep's default)")
    args = p.parse_args(argv)
    rt = make_runtime(args.device, args.precision, args.threads)
    agent, env_config, x, basis, coords = fitted(args, rt)
    rec = Recorded(basis.to_ics(x), np.zeros(args.directions))
    common = {
        "threads": torch.get_num_threads(),
        "precision": "bf16" if rt.bf16 else "fp32",
        "cpu": cpu_name(),
        "game": env_config.games()[0],
    }
    print("raw acting ...", file=sys.stderr)
    plain = {**raw(agent, env_config, args.rows, args.raw_steps, rt), **common}
    print(json.dumps(plain), flush=True)
    print("sweep ...", file=sys.stderr)
    swept = {**profiled_sweep(agent, coords, rec, env_config, args, rt), **common}
    print(json.dumps(swept), flush=True)
    fraction = round(swept["steps_per_s"] / plain["steps_per_s"], 3)
    print(json.dumps({"mode": "fraction", "sweep_over_raw": fraction, **common}), flush=True)


if __name__ == "__main__":
    main()
