"""PPO under a load that comes and goes: a run that follows the load against one that keeps its layout.

A layout timed on a quiet CPU (intra-op threads, on a CPU with native bf16) is the slowest when
another job takes a core: intra-op threads meet at a barrier after every operation, and one
descheduled thread stalls the others. A run with ``follow_load`` (the default) notices its updates
leaving their pace and times its layout again (``proclab.run.layout.PaceWatch``). This benchmark
puts both behaviours through the same load schedule, each arm one ``proclab train --preset
cleanrl`` process on starpilot (``--num-steps`` steps per env and update):

* ``--quiet`` updates alone, then ``--loaded`` updates beside ``--load`` busy processes (each a
  single-threaded Python loop: another job on a core), then ``--quiet-after`` updates alone again;
  the load is switched by watching the run's ``metrics.csv`` (one row per update);
* ``follow``: ``--learner-layout measure`` (timed at the quiet start, and again when the pace changes);
  ``fixed``: ``--learner-layout auto --no-follow-load``, which reads the layout ``follow`` just timed
  from the arms' shared cache, so both start alike.

The arms are interleaved ``--repeats`` times. Prints one JSON line per arm, repeat and phase: SPS of
the phase's updates (env steps over the seconds between their metric rows, so a re-timing counts
against the phase it falls in; the run's first update, a warm-up, is left out) and the layouts the
run went through (its ``config_history.jsonl``), then one summary line per phase with each arm's
median SPS and follow's ratio to fixed.

    python benchmarks/ppo_load.py [--quiet 6 --loaded 12 --quiet-after 12 --load 1 --repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from proclab.io.run_dirs import read_metrics
from proclab.run.runtime import cpu_has_native_bf16, cpu_name

SRC = Path(__file__).resolve().parents[1] / "src"
ARMS = {"follow": ("--learner-layout", "measure"), "fixed": ("--learner-layout", "auto", "--no-follow-load")}
PHASES = ("quiet", "loaded", "quiet_after")


def rows_written(run_root: Path) -> int:
    """Metric rows (updates) the run under ``run_root`` has written so far."""
    found = list(run_root.glob("ppo/*/*/*/metrics.csv"))
    if not found:
        return 0
    with open(found[0]) as f:
        return max(0, sum(1 for _ in f) - 1)


def busy(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def run_arm(arm: str, args, cache: Path) -> list[dict]:
    """One run through the schedule; its phases' SPS and the layouts it went through."""
    bounds = (args.quiet, args.quiet + args.loaded, args.quiet + args.loaded + args.quiet_after)
    steps = bounds[-1] * 64 * args.num_steps
    with tempfile.TemporaryDirectory() as root:
        command = [
            *(sys.executable, "-m", "proclab", "train", "--preset", "cleanrl", "--game", args.game),
            *("--num-steps", str(args.num_steps), "--total-steps", str(steps), "--device", "cpu"),
            *("--run-root", root, "--no-tensorboard", "--checkpoint-every", str(10**12), *ARMS[arm]),
        ]
        env = {**os.environ, "PYTHONPATH": str(SRC), "XDG_CACHE_HOME": str(cache)}
        train = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        load: list[subprocess.Popen] = []
        try:
            while rows_written(Path(root)) < bounds[0] and train.poll() is None:
                time.sleep(0.2)
            load = busy(args.load)
            while rows_written(Path(root)) < bounds[1] and train.poll() is None:
                time.sleep(0.2)
            stop(load)
            out = train.communicate()[0]
        finally:
            stop(load)
            if train.poll() is None:
                train.kill()
        if train.returncode != 0:
            raise SystemExit(f"proclab train failed:\n{out[-2000:]}")
        (run,) = Path(root).glob("ppo/*/*/*")
        m = read_metrics(run)
        history = run / "config_history.jsonl"
        changes = [json.loads(line) for line in history.read_text().splitlines()] if history.exists() else []
        start_layout = json.loads((run / "config.json").read_text())["learner_layout"]
        if changes:
            start_layout = changes[0]["changed"]["learner_layout"][0]
    lines = []
    for phase, lo, hi in zip(PHASES, (1, *bounds[:2]), bounds, strict=True):
        seconds = m["wall_time"][hi - 1] - m["wall_time"][lo - 1]
        env_steps = m["step"][hi - 1] - m["step"][lo - 1]
        lines.append({"phase": phase, "updates": hi - lo, "sps": round(env_steps / seconds, 1)})
    layouts = [start_layout] + [c["changed"]["learner_layout"][1] for c in changes]
    retimed = [c["retimed_at_step"] // (64 * args.num_steps) for c in changes]
    return [{**line, "layouts": layouts, "retimed_after_update": retimed} for line in lines]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", type=int, default=6, help="updates before the load")
    parser.add_argument("--loaded", type=int, default=12, help="updates with the load")
    parser.add_argument("--quiet-after", type=int, default=12, help="updates after it")
    parser.add_argument("--load", type=int, default=1, help="busy single-threaded processes while loaded")
    parser.add_argument("--num-steps", type=int, default=64, help="steps per env and update (64 envs)")
    parser.add_argument("--game", default="starpilot")
    parser.add_argument("--repeats", type=int, default=1, help="rounds over both arms, interleaved")
    args = parser.parse_args()
    if min(args.quiet, args.loaded, args.quiet_after) < 2 or args.load < 1:
        parser.error("each phase needs at least 2 updates and the load at least 1 process")
    return args


def main() -> None:
    args = parse_args()
    header = {"benchmark": "ppo_load", "cpu": cpu_name(), "native_bf16": cpu_has_native_bf16()}
    header |= {
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "load_processes": args.load,
    }
    print(json.dumps(header), flush=True)
    sps: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as cache:
        for repeat in range(args.repeats):
            for arm in ARMS:
                for line in run_arm(arm, args, Path(cache)):
                    sps.setdefault((arm, line["phase"]), []).append(line["sps"])
                    print(
                        json.dumps({"benchmark": "ppo_load", "arm": arm, "repeat": repeat, **line}),
                        flush=True,
                    )
    for phase in PHASES:
        follow, fixed = (statistics.median(sps[arm, phase]) for arm in ARMS)
        summary = {"benchmark": "ppo_load", "summary": phase, "follow_sps": follow, "fixed_sps": fixed}
        print(json.dumps({**summary, "follow_over_fixed": round(follow / fixed, 3)}), flush=True)


if __name__ == "__main__":
    main()
