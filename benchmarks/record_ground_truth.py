"""The cost of ground truth in recording: steps per second and bytes per step, with and without it, one run.

Two recorders play the same agent on the same envs into fresh stores, ``--steps`` vector steps each,
in rounds that alternate which goes first (the best round of each is kept, so bursts of contention
on a shared machine hit both alike):

* ``plain``: ``proclab record --no-ground-truth`` (frames, actions, logits, values, states);
* ``ground_truth``: the default, adding per-step ``features`` and ``events`` and each episode's
  first game state (procgen's ``get_state`` of every env at every step, read by
  :mod:`proclab.record.ground_truth`).

Rates count env steps per wall-clock second and per CPU second of the process (all threads);
``ratio`` is ground truth over plain. Bytes per step are the stores' sizes on disk over the steps
they hold, with the ground-truth fields' share. A last line times reading the features of one
state, the recorder's batched reader against parse_state + features (the definitions).
Defaults are the seed's recording setting (CoinRun hard, no backgrounds, its GRU agent):

    python benchmarks/record_ground_truth.py --num-envs 64 --steps 200 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs.state import features, parse_state
from proclab.envs.state.sample import random_states
from proclab.models import agent_preset, build_agent
from proclab.record import EpisodeRecorder
from proclab.record.ground_truth import GameTruth
from proclab.run.runtime import make_runtime
from proclab.store import EpisodeStore, ShardWriter

VARIANTS = ("plain", "ground_truth")


class _Stop(Exception):
    pass


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def record_rate(agent, env, runtime, steps: int, store: Path, ground_truth: bool) -> tuple[float, float]:
    """Env steps per wall and CPU second of the recorder writing ``store``, over ``steps`` vector steps."""
    writer = ShardWriter(store, background=True)
    count, start = [0], [(0.0, 0.0)]

    def tick() -> None:  # timing starts after the first step (env.reset() happens inside run)
        count[0] += 1
        if count[0] == 1:
            start[0] = _clocks()
        writer.maybe_commit()
        if count[0] == steps + 1:
            raise _Stop

    recorder = EpisodeRecorder(env, agent, runtime, ground_truth=ground_truth)
    with contextlib.suppress(_Stop):
        recorder.run(10**9, writer.append, tick=tick)
    writer.close()
    wall, cpu = _clocks()
    n = steps * env.num_envs
    return n / (wall - start[0][0]), n / (cpu - start[0][1])


def store_bytes(store: Path) -> tuple[int, dict[str, float]]:
    """Steps held, and bytes per step on disk: in all, and of the ground-truth fields."""
    data = EpisodeStore(store)
    if data.num_steps == 0:  # no episode finished: run longer
        return 0, {}
    parts = {"features": store.glob("*/steps/features"), "events": store.glob("*/steps/events"),
             "initial_state": store.glob("*/blobs/initial_state")}  # fmt: skip
    sizes = {
        k: sum(f.stat().st_size for d in dirs for f in d.rglob("*") if f.is_file())
        for k, dirs in parts.items()
    }
    per_step = {k: round(v / data.num_steps, 1) for k, v in sizes.items() if v}
    return data.num_steps, {"all": round(data.size_on_disk() / data.num_steps, 1), **per_step}


def reader_cost(game: str, mode: str, states: int) -> dict:
    """Microseconds per state: the recorder's batched reader and the definitions (parse + features)."""
    batch = list(random_states(game, mode, states, num_envs=8, keep_prob=0.3))
    truth = GameTruth(game)

    def best(f, repeats: int = 3) -> float:
        times = []
        for _ in range(repeats):
            t = time.process_time()
            f()
            times.append(time.process_time() - t)
        return min(times) / states * 1e6

    return {
        "fast_us_per_state": round(best(lambda: truth.see(batch)), 1),
        "definition_us_per_state": round(best(lambda: [features(parse_state(s)) for s in batch]), 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="coinrun")
    parser.add_argument("--mode", default="hard")
    parser.add_argument("--backgrounds", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--agent", default="interp-gru", help="agent preset (random weights)")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200, help="vector steps per recorder and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reader-states", type=int, default=256, help="states for the reader timing")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args(argv)

    rt = make_runtime(args.device, "fp32", args.threads)
    torch.manual_seed(0)
    agent = rt.prepare(build_agent(agent_preset(args.agent))).eval()
    config = EnvConfig(game=(args.game,), mode=args.mode, use_backgrounds=args.backgrounds)
    env = ProcgenVecEnv(replace(config, num_envs=args.num_envs), seed=0)
    tmp = Path(tempfile.mkdtemp(prefix="ground-truth-bench-"))
    rates: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    common = {"game": args.game, "mode": args.mode, "backgrounds": args.backgrounds, "agent": args.agent,
              "num_envs": args.num_envs, "steps": args.steps, "device": rt.device.type}  # fmt: skip
    try:
        for r in range(args.rounds):
            for variant in VARIANTS[r % 2 :] + VARIANTS[: r % 2]:  # each goes first in some round
                store = tmp / f"{variant}-{r}"
                rates[variant].append(
                    record_rate(agent, env, rt, args.steps, store, variant == "ground_truth")
                )
        best = {v: max(w for w, _ in rates[v]) for v in VARIANTS}
        best_cpu = {v: max(c for _, c in rates[v]) for v in VARIANTS}
        row = {"benchmark": "record_ground_truth", **common}
        row |= {f"{v}_steps_per_s": round(best[v]) for v in VARIANTS}
        row |= {"ratio": round(best["ground_truth"] / best["plain"], 3)}
        row |= {f"{v}_steps_per_cpu_s": round(best_cpu[v]) for v in VARIANTS}
        row |= {"ratio_cpu": round(best_cpu["ground_truth"] / best_cpu["plain"], 3)}
        print(json.dumps(row), flush=True)
        for variant in VARIANTS:
            steps, per_step = store_bytes(tmp / f"{variant}-{args.rounds - 1}")
            print(json.dumps({"benchmark": "record_bytes_per_step", **common, "variant": variant,
                              "stored_steps": steps, "bytes_per_step": per_step}), flush=True)  # fmt: skip
        print(json.dumps({"benchmark": "ground_truth_reader", "game": args.game, "mode": args.mode,
                          **reader_cost(args.game, args.mode, args.reader_states)}), flush=True)  # fmt: skip
    finally:
        env.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
