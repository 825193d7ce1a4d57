"""Tools 3 and 4 of the goal-detection benchmark on one agent: the steering vector and the sweep, and their calls.

docs/misgeneralization.md ("The benchmark: decision rules, written before any result") fixes how each tool calls
which goal an agent pursues; :mod:`proclab.interpret.goals.detect_steering` implements rules 3 and 4. This script
plays both tools through the library on held-out levels where the goals are apart (the level rule: CoinRun
``coin-moved``, the coin moved in every level; Maze the standard mazes, ``none``, whose cheese may lie anywhere)
and never computes the agent's behavioural label.

* **Steering** (rule 3): ``proclab.analyze.steer`` at its defaults (hook ``torso.block1.hook_out``, per-level
  goal-present minus goal-absent vectors of goal A) with coefficients -1 (subtract the vector) and 0, and
  ``--draws`` same-norm random directions (the rule ranks among 20), actions sampled as the label samples them.
* **The sweep** (rule 4): the agent's hidden-state basis, fitted as ``analyze hidden`` fits it (PCA/ICA,
  ``--ics`` directions) on the agent's own state (a recurrent core's ``core.0.h``; a feed-forward agent's
  ``torso.hook_fc``) over ``--basis-steps`` steps of play on *unedited* levels (``--basis-levels``), then
  ``proclab.analyze.sweep`` with both goals tracked, every direction and ``--arms``, on the held-out levels,
  beside ``--draws`` same-norm random directions of the basis's span (rule 4's controls, version 2).

``--rules 3`` (version 3 of the rules) plays the steering where the goals are one place (CoinRun's standard
levels, Maze's cheese on the corner: ``calls.JOINT``), with the vector built on ``--vector-levels`` under
``--vector-level-rule`` (``--no-per-level``: their mean), and reads P(A) alone; the sweep makes no call under it.

``--random-init`` plays a randomly initialised agent of the same architecture instead (the control on which a
tool must make no call). Resumable by stage: OUT/steer and OUT/sweep hold each tool's saved result and are read
back instead of played again; OUT/calls.json holds the calls. Prints one JSON line per stage and per call.

    nice -n 15 env OMP_NUM_THREADS=1 python benchmarks/detect_goals_steering.py \
        --agent coinrun/interpreting-rl-behavior --out OUT --levels 50 [--random-init]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import proclab
from proclab.interpret.goals.benchmark import BenchmarkSettings, apart_rule, steer_for_goals, sweep_for_goals
from proclab.interpret.goals.calls import JOINT
from proclab.interpret.goals.detect_steering import steering_call, sweep_call
from proclab.interpret.steering.steer import SteerSettings
from proclab.interpret.sweep.grid import SweepSettings
from proclab.interpret.sweep.run import BasisSettings
from proclab.io.run_dirs import write_json_atomic


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agent", required=True, help="a proclab run, checkpoint or registry name")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument(
        "--random-init", action="store_true", help="a random-initialised agent of its architecture"
    )
    p.add_argument("--levels", type=int, default=50, help="held-out levels of the steering and the sweep")
    p.add_argument("--sweep-levels", type=int, default=None, help="the sweep's levels (default --levels)")
    p.add_argument("--split", default="3000000:1000000", help="held-out levels (START:NUM)")
    p.add_argument("--level-rule", default=None, help="default: coin-moved (coinrun), none (maze)")
    p.add_argument("--draws", type=int, default=20, help="same-norm random directions (the rule reads 20)")
    p.add_argument(
        "--vector-levels", default="0:20", help="levels of the mean vector's info (per-level play)"
    )
    p.add_argument("--ics", type=int, default=16, help="directions of the sweep's basis")
    p.add_argument("--arms", default="collapse,mean,resample,p05,p95", help="the sweep's arms")
    p.add_argument("--basis-levels", default="500000:1000", help="unedited levels the basis is fitted on")
    p.add_argument("--basis-steps", type=int, default=4000, help="steps of play the basis is fitted on")
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--permutations", type=int, default=2000, help="the sweep's permutation tests (not read)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stages", default="steer,sweep")
    p.add_argument(
        "--rules", type=int, default=2, choices=(2, 3),
        help="the rules' version: 3 plays the steering on joint levels (calls.JOINT) and reads A alone",
    )  # fmt: skip
    p.add_argument("--no-per-level", action="store_true", help="one mean vector over --vector-levels")
    p.add_argument(
        "--vector-level-rule", default=None, help="level rule of --vector-levels (default: the played)"
    )
    p.add_argument("--precision", default="auto", help="the agent's arithmetic: fp32, bf16 or auto")
    return p.parse_args(argv)


def emit(row: dict) -> None:
    print(json.dumps(row), flush=True)


def settings_of(args, rule: str) -> BenchmarkSettings:
    """The options as the library's benchmark settings (:mod:`proclab.interpret.goals.benchmark`)."""
    return BenchmarkSettings(
        steer=SteerSettings(
            split=args.split, levels=args.levels, coefficients=(-1.0, 0.0), controls=args.draws,
            vector_levels=args.vector_levels, rows=args.rows, seed=args.seed, level_rule=rule, greedy=False,
            per_level=not args.no_per_level, vector_level_rule=args.vector_level_rule,
        ),
        sweep=SweepSettings(
            levels=args.sweep_levels or args.levels, split=args.split, arms=args.arms, level_rule=rule, goals=True,
            rows=args.rows, permutations=args.permutations, seed=args.seed, random_directions=args.draws,
        ),
        basis=BasisSettings(n_ics=args.ics, seed=args.seed),
        basis_levels=args.basis_levels,
        basis_steps=args.basis_steps,
        seed=args.seed,
    )  # fmt: skip


def steer_stage(agent, settings: BenchmarkSettings, out: Path) -> dict:
    folder = out / "steer"
    if not (folder / "result.json").is_file():
        start = time.perf_counter()
        result = steer_for_goals(agent, settings)
        result.save(folder)
        steps = sum(r["length"]["intervened"] for r in result.coefficients.values()) * result.levels
        emit({"stage": "steer", "seconds": round(time.perf_counter() - start, 1), "levels": result.levels,
              "approx_steps_vector_arms": steps})  # fmt: skip
    return json.loads((folder / "result.json").read_text())


def sweep_stage(agent, settings: BenchmarkSettings, out: Path) -> dict:
    folder = out / "sweep"
    if not (folder / "result.json").is_file():
        start = time.perf_counter()
        result = sweep_for_goals(agent, settings)
        result.save(folder)
        emit({"stage": "sweep", "seconds": round(time.perf_counter() - start, 1),
              "steps": result.summary["steps"], "episodes": result.summary["episodes"]})  # fmt: skip
    return json.loads((folder / "result.json").read_text())


PLAYED = ("agent", "random_init", "levels", "sweep_levels", "split", "level_rule", "draws", "vector_levels", "ics",
          "arms", "basis_levels", "basis_steps", "permutations", "seed", "rules", "no_per_level",
          "vector_level_rule", "precision")  # fmt: skip
"""The options a saved stage depends on: a resumed run must give the same ones."""


def check_settings(args) -> None:
    """OUT/settings.json holds the options of the first run; a resumed run with other options is refused (its
    saved stages would be read back as if played with them)."""
    mine = {k: str(getattr(args, k)) for k in PLAYED}
    path = args.out / "settings.json"
    if path.is_file():
        saved = json.loads(path.read_text())
        differ = sorted(k for k in mine if saved.get(k) != mine[k])
        if differ:
            raise SystemExit(
                f"{args.out} holds stages played with other options ({', '.join(differ)}); use another --out"
            )
    else:
        write_json_atomic(path, mine)


def main(argv=None) -> None:
    args = parse(argv)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    check_settings(args)
    agent = proclab.load(args.agent, precision=args.precision)
    name = args.agent
    if args.random_init:
        agent, name = proclab.analyze.random_agent(agent, seed=args.seed), f"{args.agent} (random init)"
    stages = set(args.stages.split(","))
    if args.rules == 3 and "sweep" in stages:
        raise SystemExit("rule 4 makes no call under version 3 of the rules: --stages steer")
    game = agent.env_config.games()[0]
    rule = JOINT[game] if args.rules == 3 and args.level_rule is None else apart_rule(agent, args.level_rule)
    settings = settings_of(args, rule)
    calls = []
    if "steer" in stages:
        steered = steer_stage(agent, settings, args.out)
        calls.append(steering_call(steered["goals"], name, entity=steered["entity"], version=args.rules))
    if "sweep" in stages:
        swept = sweep_stage(agent, settings, args.out)
        calls.append(sweep_call(swept["summary"]["goals"], name))
    rows = [{"tool": c.tool, "agent": c.agent, "call": c.call, "evidence": c.evidence} for c in calls]
    for row in rows:
        emit(row)
    settings = {k: str(v) for k, v in vars(args).items()}
    write_json_atomic(args.out / "calls.json", {"settings": {**settings, "level_rule": rule}, "calls": rows})


if __name__ == "__main__":
    main()
