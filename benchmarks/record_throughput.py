"""Recording throughput: the agent+env loop with and without writing to an episode store, in one run.

Three loops play the same agent on the same envs for ``--steps`` vector steps each, in
rounds that rotate their order (the best round of each is kept, so bursts of contention on a
shared machine hit all alike):

* ``act``: the bare acting loop (``Actor.act`` + ``env_step``), what training's actor does;
* ``record_null``: the full recorder (both logits, states, episode assembly) with a sink that
  drops the episodes, i.e. the bookkeeping without the store;
* ``record_store``: the full recorder writing to a fresh store (background commits), timed
  until its last commit is on disk.

The target: ``record_store`` keeps >= 80% of ``act``'s env steps/s (``ratio``). Rates count
env steps taken, per wall-clock second and per CPU second of the process (``ratio_cpu``: all
its threads, the writer's included; steadier than wall time on a machine shared with other
jobs). ``written_steps`` is what reached the store (episodes still running when a round stops
are not written). Then random windows (``WindowDataset``, 34 steps, the world
model's shape) are read through a shuffled DataLoader with 0 and 2 workers, and the store's
bytes per step are reported per field (the interpreting-rl-behavior recorder: ~12.6 KB raw).
One JSON line per measurement. Defaults are the seed's recording setting (CoinRun hard, no
backgrounds, its GRU agent); a short run on a CPU:

    python benchmarks/record_throughput.py --num-envs 32 --steps 300 --rounds 2
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
from proclab.models import agent_preset, build_agent
from proclab.record import EpisodeRecorder
from proclab.rl.rollout import Actor
from proclab.run.runtime import make_runtime
from proclab.store import EpisodeStore, ShardWriter
from proclab.store.windows import WindowDataset


class _Stop(Exception):
    pass


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _rates(n: int, start: tuple[float, float]) -> tuple[float, float]:
    """Steps per wall-clock second and per CPU second of this process (all its threads)."""
    wall, cpu = _clocks()
    return n / (wall - start[0]), n / (cpu - start[1])


def act_rate(agent, env, runtime, steps: int) -> tuple[float, float]:
    actor = Actor(env, agent, runtime)
    _, action, _, state = actor.act()  # as for the recorder, timing starts after the first step
    actor.env_step(action, state)
    start = _clocks()
    for _ in range(steps):
        _, action, _, state = actor.act()
        actor.env_step(action, state)
    return _rates(steps * env.num_envs, start)


def record_rate(agent, env, runtime, steps: int, store: Path | None) -> tuple[float, float, int]:
    """Env steps per wall and CPU second of the recorder over ``steps`` vector steps; steps written."""
    writer = ShardWriter(store, background=True) if store is not None else None
    count, start = [0], [(0.0, 0.0)]

    def tick() -> None:  # timing starts after the first step (env.reset() happens inside run)
        count[0] += 1
        if count[0] == 1:
            start[0] = _clocks()
        if writer is not None:
            writer.maybe_commit()
        if count[0] == steps + 1:
            raise _Stop

    recorder = EpisodeRecorder(env, agent, runtime)
    with contextlib.suppress(_Stop):
        recorder.run(10**9, writer.append if writer is not None else lambda s, e: None, tick=tick)
    if writer is not None:
        writer.close()
    return *_rates(steps * env.num_envs, start[0]), (writer.steps if writer is not None else 0)


def window_rate(store: Path, workers: int, batches: int, batch_size: int) -> float:
    data = WindowDataset(store, 34, stride=1, min_steps=3)
    loader = torch.utils.data.DataLoader(data, batch_size=batch_size, shuffle=True, num_workers=workers)
    it = iter(loader)
    next(it)  # worker start-up is not reading
    start = time.perf_counter()
    for _ in range(batches):
        next(it)
    return batches * batch_size / (time.perf_counter() - start)


def field_bytes(store: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for shard in store.iterdir():
        steps = shard / "steps"
        if not steps.is_dir():
            continue
        for f in steps.rglob("*"):
            if f.is_file() and f.name != "zarr.json":
                name = str(f.relative_to(steps)).split("/c/")[0]
                out[name] = out.get(name, 0) + f.stat().st_size
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="coinrun")
    parser.add_argument("--mode", default="hard")
    parser.add_argument("--backgrounds", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--agent", default="interp-gru", help="agent preset (random weights)")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=500, help="vector steps per loop and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=20, help="window batches (of 32) per reader setting")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args()

    rt = make_runtime(args.device, "fp32", args.threads)
    torch.manual_seed(0)
    agent = rt.prepare(build_agent(agent_preset(args.agent))).eval()
    config = EnvConfig(game=(args.game,), mode=args.mode, use_backgrounds=args.backgrounds)
    env = ProcgenVecEnv(replace(config, num_envs=args.num_envs), seed=0)
    tmp = Path(tempfile.mkdtemp(prefix="record-bench-"))
    wall: dict[str, list[float]] = {"act": [], "record_null": [], "record_store": []}
    cpu: dict[str, list[float]] = {k: [] for k in wall}
    written = 0
    try:
        names = list(wall)
        for r in range(args.rounds):
            for name in names[r % 3 :] + names[: r % 3]:  # each loop goes first in some round
                if name == "act":
                    w, c = act_rate(agent, env, rt, args.steps)
                else:
                    w, c, n = record_rate(
                        agent, env, rt, args.steps, tmp / "store" if name == "record_store" else None
                    )
                    written += n
                wall[name].append(w)
                cpu[name].append(c)
        best = {k: max(v) for k, v in wall.items()}
        best_cpu = {k: max(v) for k, v in cpu.items()}
        common = {
            "game": args.game,
            "mode": args.mode,
            "backgrounds": args.backgrounds,
            "agent": args.agent,
            "num_envs": args.num_envs,
            "device": rt.device.type,
        }
        print(
            json.dumps(
                {
                    "benchmark": "record_throughput",
                    **common,
                    **{f"{k}_steps_per_s": round(v) for k, v in best.items()},
                    "ratio": round(best["record_store"] / best["act"], 3),
                    **{f"{k}_steps_per_cpu_s": round(v) for k, v in best_cpu.items()},
                    "ratio_cpu": round(best_cpu["record_store"] / best_cpu["act"], 3),
                    "written_steps": written,
                }
            ),
            flush=True,
        )
        store = EpisodeStore(tmp / "store")
        per_field = {k: round(v / store.num_steps, 1) for k, v in sorted(field_bytes(tmp / "store").items())}
        print(
            json.dumps(
                {
                    "benchmark": "record_bytes_per_step",
                    **common,
                    "steps": store.num_steps,
                    "episodes": store.num_episodes,
                    "bytes_per_step": round(store.size_on_disk() / store.num_steps, 1),
                    "obs_raw_bytes_per_step": 3 * 64 * 64,
                    "per_field": per_field,
                }
            ),
            flush=True,
        )
        for workers in (0, 2):
            wps = window_rate(tmp / "store", workers, args.batches, 32)
            print(
                json.dumps(
                    {
                        "benchmark": "window_reads",
                        "workers": workers,
                        "window": 34,
                        "batch": 32,
                        "windows_per_s": round(wps, 1),
                    }
                ),
                flush=True,
            )
    finally:
        env.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
