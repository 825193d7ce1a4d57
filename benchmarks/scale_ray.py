"""One process against a Ray cluster of two nodes on this machine: a sweep in parts and a small population.

Starts a :class:`~proclab.run.local_cluster.LocalCluster` (head + worker, ``--cpus`` CPUs each), then measures:

* ``ray_overhead``: Ray's cost per task, from ``--noop-tasks`` tasks that do nothing run through
  :func:`proclab.run.tasks.run_tasks` (``connect_s``: joining the cluster; ``per_task_ms``: the rest, per task);
* ``sweep``: ``analyze sweep --parts P`` of a fresh tiny GRU agent on BossFight (its basis fitted by ``analyze
  hidden`` on 6 recorded episodes), in one process and with ``--ray``; the outputs must be equal (checked);
* ``population``: ``proclab.train_population`` of ``--members`` tiny agents, one after another in one process and
  as Ray tasks.

Each line: ``{"what": ..., "one_process_s": ..., "cluster_s": ..., "speedup": ..., "units": ...}``. On a
machine whose cores other processes use too, the speed-up is a floor. Two nodes of one CPU, a few minutes:

    OMP_NUM_THREADS=1 python benchmarks/scale_ray.py --workdir /tmp/scale
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from proclab.cli import main
from proclab.envs import EnvConfig
from proclab.models import AgentConfig, build_agent
from proclab.rl.agent_checkpoints import save_agent_checkpoint
from proclab.rl.config import TrainConfig, preset
from proclab.rl.population import PopulationSettings, train_population
from proclab.run.local_cluster import LocalCluster
from proclab.run.runtime import RuntimeConfig
from proclab.run.tasks import TaskSettings, run_tasks

TINY = dict(widths=(4, 8, 8), fc=32)


def nothing(unit: int) -> int:
    """A task that does nothing: what is left of its time is Ray's."""
    return unit


def overhead(address: str, tasks: int) -> dict:
    start = time.perf_counter()
    where = TaskSettings(ray_address=address)
    stream = run_tasks(nothing, list(range(tasks)), where)
    first = next(stream)
    connected = time.perf_counter() - start
    results = [first, *stream]
    total = time.perf_counter() - start
    assert sorted(i for i, _ in results) == list(range(tasks))
    return {"what": "ray_overhead", "tasks": tasks, "connect_s": round(connected, 2),
            "per_task_ms": round(1000 * (total - connected) / max(1, tasks - 1), 1)}  # fmt: skip


def analysis_folder(work: Path) -> Path:
    """A fresh tiny GRU agent, 6 recorded BossFight episodes and their basis (``analyze hidden``)."""
    torch.manual_seed(0)
    agent, env = AgentConfig(core="gru", rnn_size=16, **TINY), EnvConfig(game=("bossfight",), num_envs=3)
    ckpt = save_agent_checkpoint(
        work / "run", build_agent(agent), TrainConfig(env=env, agent=agent), env.games(), 0, None
    )
    store, out = work / "DATA", work / "A"
    main(["record", "--agent", str(ckpt), "--precision", "fp32", "--episodes", "6", "--num-envs", "3",
          "--out", str(store), "--torch-threads", "1"])  # fmt: skip
    main(["analyze", "hidden", "--data", str(store), "--out", str(out), "--n-ics", "4", "--clusters", "4",
          "--nmf", "3", "--perplexity", "10", "--fit-points", "120", "--no-plots", "--torch-threads", "1"])  # fmt: skip
    return out


def timed_sweep(folder: Path, args: list[str]) -> tuple[float, bytes]:
    shutil.rmtree(folder / "sweep", ignore_errors=True)
    shutil.rmtree(folder / "sweep-parts", ignore_errors=True)
    start = time.perf_counter()
    main(["analyze", "sweep", "--out", str(folder), *args])
    seconds = time.perf_counter() - start
    with np.load(folder / "sweep" / "episodes.npz") as f:
        return seconds, b"".join(f[k].tobytes() for k in sorted(f.files))


def sweep(folder: Path, address: str, levels: int, parts: int) -> dict:
    args = ["--levels", str(levels), "--parts", str(parts), "--arms", "mean,p05,p95", "--directions", "0:4",
            "--permutations", "500", "--bootstrap", "200", "--rows", "16", "--torch-threads", "1",
            "--precision", "fp32", "--seed", "3"]  # fmt: skip
    one, outcomes = timed_sweep(folder, args)
    spread, spread_outcomes = timed_sweep(folder, [*args, "--ray", address])
    assert spread_outcomes == outcomes, "the sweep on the cluster differs from the one-process sweep"
    summary = json.loads((folder / "sweep" / "sweep.json").read_text())
    return {"what": "sweep", "units": parts, "levels": levels, "episodes": summary["episodes"],
            "steps": summary["steps"], "one_process_s": round(one, 1), "cluster_s": round(spread, 1),
            "speedup": round(one / spread, 2), "equal": True}  # fmt: skip


def population(work: Path, address: str, members: int, steps: int) -> dict:
    base = preset("tiny")
    config = replace(
        base, env=replace(base.env, num_envs=4), agent=replace(base.agent, **TINY),
        ppo=replace(base.ppo, num_steps=32, num_minibatches=2), val_num_envs=0, tensorboard=False,
        learner_layout="whole:intra,acting:intra",
    )  # fmt: skip
    runtime = RuntimeConfig(device="cpu", precision="fp32", torch_threads=1)
    settings = PopulationSettings(seeds=tuple(range(1, members + 1)), games=("bigfish",), presets=(config,),
                                  steps=steps, eval_episodes=2)  # fmt: skip
    times = []
    for where, given in (("one", None), ("cluster", address)):
        start = time.perf_counter()
        result = train_population(
            replace(settings, ray_address=given), work / where, runtime=runtime, progress=False
        )
        times.append(time.perf_counter() - start)
        assert not result.failed, result.failed
    return {"what": "population", "units": members, "steps_per_member": steps, "one_process_s": round(times[0], 1),
            "cluster_s": round(times[1], 1), "speedup": round(times[0] / times[1], 2)}  # fmt: skip


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--cpus", type=int, default=1, help="CPUs of each of the two nodes")
    parser.add_argument("--noop-tasks", type=int, default=40)
    parser.add_argument("--levels", type=int, default=48)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--steps", type=int, default=512)
    args = parser.parse_args()
    if args.workdir.exists() and any(args.workdir.iterdir()):
        sys.exit(f"--workdir {args.workdir} is not empty: give a new folder (nothing in it is overwritten)")
    args.workdir.mkdir(parents=True, exist_ok=True)
    with contextlib.redirect_stdout(
        sys.stderr
    ):  # the commands' own output: stdout holds the JSON lines alone
        folder = analysis_folder(args.workdir)
    with LocalCluster(2, args.cpus, env={"OMP_NUM_THREADS": "1"}, dashboard=False) as cluster:
        measures = (
            lambda: overhead(cluster.address, args.noop_tasks),
            lambda: sweep(folder, cluster.address, args.levels, args.parts),
            lambda: population(args.workdir / "population", cluster.address, args.members, args.steps),
        )
        for measure in measures:
            with contextlib.redirect_stdout(sys.stderr):
                line = measure()
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    cli()
