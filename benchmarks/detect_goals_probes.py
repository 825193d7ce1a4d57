"""Tools 1 and 2 of the goal-detection benchmark on one agent: probes of each goal's position and channel
tracking of each goal, each turned into a call (goal A, goal B or none) by the rules docs/misgeneralization.md
fixed before any result (:mod:`proclab.interpret.goals.detect_probes`).

The agent plays held-out levels where its two goals are apart (CoinRun: ``coin-moved``, every coin moved;
Maze: standard mazes, the cheese anywhere, unless ``--game-rule`` says otherwise), each level once, sampled
actions. Then, through the library (``proclab.analyze.probe``):

* rule 1: linear probes from ``--hook`` (default the recurrent state ``core.0.hook_h``, else ``torso.hook_fc``)
  of the offsets from the agent to both goals (``coin_dx, coin_dy, end_dx, end_dy``; Maze ``cheese_*``,
  ``corner_*``) against the random-initialised agent, the control task, shuffled labels and the time baseline;
* rule 2: which channels of the conv map ``--track-hook`` follow each goal's pixel position, the agent's best
  channel against the random-initialised agent's best.

No behavioural outcome (which goal an episode reached) is read or written. ``--random-init SEED`` replaces the
agent by a randomly initialised one of its architecture (the benchmark's control: a tool must make no call on
it); its own random-agent control is another initialisation (``--seed``).

    python benchmarks/detect_goals_probes.py --agent coinrun/interpreting-rl-behavior --out OUT --episodes 48
    python benchmarks/detect_goals_probes.py --agent coinrun/interpreting-rl-behavior --random-init 1 --out OUT2

Resumable: the episodes are played in chunks of levels, each kept as OUT/chunks/FIRST-LAST.npz (its level seeds) and not
played again (the actions of chunk k are seeded from --seed + k).
Writes OUT/calls.json (the calls with their evidence, and the settings), OUT/probes.json and OUT/tracking.json
(the full results; ``--stages probes`` applies rule 1 alone, e.g. to re-fit the kept chunks); prints JSON lines:
one per chunk, one per call, then the summary.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import torch

import proclab
from proclab.interpret.goals.calls import APART
from proclab.interpret.goals.detect_probes import (
    RULE_CONTROLS,
    RULE_CONTROLS_V3,
    goal_pair,
    goal_targets,
    probe_call,
    tracking_call,
)
from proclab.interpret.goals.label import LabelSettings, apart_levels
from proclab.record.rollout import Rollout

PER_STEP = ("obs", "actions", "rewards", "terminated", "truncated", "values", "logits", "mask")
PER_EPISODE = ("levels", "returns", "level_complete")


def save_chunk(ro: Rollout, path: Path) -> None:
    """What the probes need of a chunk's rollout (no goal outcomes), written atomically."""
    arrays = {k: getattr(ro, k).numpy() for k in (*PER_STEP, *PER_EPISODE)}
    arrays |= {f"truth/{k}": v.numpy() for k, v in ro.truth.items()}
    arrays["start_states"] = np.frombuffer(b"".join(ro.start_states), np.uint8)
    arrays["start_sizes"] = np.array([len(s) for s in ro.start_states], np.int64)
    tmp = path.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)


def load_chunks(paths: list[Path], game: str, mode: str, rule: str, agent) -> Rollout:
    """One rollout of every chunk's episodes (per-step arrays padded to the longest episode)."""
    parts = [dict(np.load(p)) for p in paths]
    T = max(p["mask"].shape[0] for p in parts)

    def padded(a: np.ndarray) -> np.ndarray:
        return np.concatenate([a, np.zeros((T - len(a), *a.shape[1:]), a.dtype)]) if len(a) < T else a

    step = {k: np.concatenate([padded(p[k]) for p in parts], 1) for k in PER_STEP}
    names = [k for k in parts[0] if k.startswith("truth/")]
    truth = {k.removeprefix("truth/"): np.concatenate([padded(p[k]) for p in parts], 1) for k in names}
    episode = {k: np.concatenate([p[k] for p in parts]) for k in PER_EPISODE}
    starts = []
    for p in parts:
        blob, offsets = p["start_states"].tobytes(), np.r_[0, np.cumsum(p["start_sizes"])]
        starts += [blob[a:b] for a, b in itertools.pairwise(offsets)]
    tensors = {k: torch.from_numpy(v) for k, v in (step | episode).items()}
    truth = {k: torch.from_numpy(v) for k, v in truth.items()}
    return Rollout(
        game=game, mode=mode, level_rule=rule, truth=truth, start_states=tuple(starts), agent=agent, **tensors
    )


def level_seeds(args, game: str, mode: str, rule: str) -> list[int]:
    """The levels played: ``--episodes`` seeds from ``--start`` on, or with ``--apart-region`` the first
    ``--episodes`` of ``--start:100000`` whose goals part as the label's do (Maze's cheese outside the top-right
    region; :func:`~proclab.interpret.goals.label.apart_levels`)."""
    if args.apart_region is None:
        return list(range(args.start, args.start + args.episodes))
    settings = LabelSettings(rule=rule, region=args.apart_region)
    kept = apart_levels(game, f"{args.start}:100000", args.episodes, mode, settings)
    return [lv.level_seed for lv in kept]


def play(agent, args, chosen: list[int], game: str, mode: str, rule: str, chunks: Path) -> list[Path]:
    """Play the levels ``chosen`` (:func:`level_seeds`) in chunks, skipping the chunks already kept; the kept
    chunks' paths."""
    paths = []
    for k, lo in enumerate(range(0, args.episodes, args.chunk)):
        seeds = chosen[lo : lo + args.chunk]
        path = chunks / f"{seeds[0]}-{seeds[-1]}.npz"
        paths.append(path)
        if path.exists():
            continue
        t = time.perf_counter()
        levels = [proclab.Level.generate(game, s, mode=mode) for s in seeds]
        if rule != "none":
            levels = [lv.with_rule(rule) for lv in levels]
        ro = proclab.rollout(
            agent, levels=levels, episodes=len(levels), num_envs=len(levels), seed=args.seed + k, truth=True
        )
        save_chunk(ro, path)
        wall = time.perf_counter() - t
        steps = int(ro.mask.sum())
        print(json.dumps({"chunk": path.name, "episodes": len(levels), "steps": steps, "wall_s": round(wall, 1),
                          "steps_per_s": round(steps / wall, 1)}), flush=True)  # fmt: skip
    return paths


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agent", required=True, help="a run, checkpoint or published agent name")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--episodes", type=int, default=48, help="levels played, each once")
    ap.add_argument(
        "--game-rule", default=None, help="level rule (default: coin-moved for CoinRun, none for Maze)"
    )
    ap.add_argument("--start", type=int, default=3_000_000, help="first level seed (held-out levels)")
    ap.add_argument("--chunk", type=int, default=8, help="levels played (and kept) together")
    ap.add_argument("--apart-region", type=int, default=None, metavar="R",
                    help="play only levels whose goals part as the label's do (Maze: cheese outside the top-right "
                         "R x R); default: every level from --start")  # fmt: skip
    ap.add_argument("--rules", type=int, default=1, choices=(1, 3),
                    help="rule 1's version: 3 adds the agent's position to its controls")  # fmt: skip
    ap.add_argument("--random-init", type=int, default=None, metavar="SEED",
                    help="test a randomly initialised agent of the agent's architecture (seed != --seed)")  # fmt: skip
    ap.add_argument("--hook", default=None, help="rule 1's hook (default core.0.hook_h, else torso.hook_fc)")
    ap.add_argument("--track-hook", default="torso.block1.res0.hook_out", help="rule 2's conv hook")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--permutations", type=int, default=0, help="tracking's per-channel test (0: automatic)")
    ap.add_argument("--seed", type=int, default=0, help="actions, the control random agent, bootstraps")
    ap.add_argument(
        "--stages", default="probes,tracking", help="the rules to apply: probes (1), tracking (2)"
    )
    args = ap.parse_args(argv)
    stages = args.stages.split(",")
    if set(stages) - {"probes", "tracking"}:
        ap.error(f"--stages takes probes and/or tracking, got {args.stages!r}")
    if args.episodes < 3 or args.chunk < 1:
        ap.error("--episodes must be >= 3 (cross-validation over episodes) and --chunk >= 1")
    if args.random_init is not None and args.random_init == args.seed:
        ap.error("--random-init must differ from --seed: the control random agent is initialised from --seed")
    start = time.perf_counter()
    agent = proclab.load(args.agent, device="cpu", precision="fp32")
    name = args.agent if args.random_init is None else f"{args.agent} (random init {args.random_init})"
    if args.random_init is not None:
        agent = proclab.analyze.random_agent(agent, args.random_init)
    game, mode = agent.env_config.games()[0], agent.env_config.mode
    goals = goal_pair(game)
    rule = args.game_rule or APART[game]
    hook = args.hook or ("core.0.hook_h" if "core.0.hook_h" in agent.hook_names() else "torso.hook_fc")
    chunks = args.out / "chunks"
    chunks.mkdir(parents=True, exist_ok=True)
    chosen = level_seeds(args, game, mode, rule)
    paths = play(agent, args, chosen, game, mode, rule, chunks)
    played = time.perf_counter() - start
    ro = load_chunks(paths, game, mode, rule, agent)
    common = dict(folds=args.folds, bootstrap=args.bootstrap, seed=args.seed)
    results, calls, wall = {}, [], {"play": round(played, 1)}
    if "probes" in stages:
        t = time.perf_counter()
        controls = RULE_CONTROLS_V3 if args.rules == 3 else RULE_CONTROLS
        settings = proclab.analyze.ProbeSettings(targets=goal_targets(game), controls=controls, **common)
        with redirect_stdout(sys.stderr):  # the analysis' progress bar: stdout holds only the JSON lines
            results["probes"] = proclab.analyze.probe(ro, hook, settings=settings)
        calls.append(probe_call(results["probes"].probes, game, name, seed=args.seed, version=args.rules))
        wall["probes"] = round(time.perf_counter() - t, 1)
    if "tracking" in stages:
        t = time.perf_counter()
        settings = proclab.analyze.ProbeSettings(
            entities=goals, controls=("random_agent",), permutations=args.permutations, **common
        )
        with redirect_stdout(sys.stderr):
            results["tracking"] = proclab.analyze.probe(ro, args.track_hook, settings=settings)
        calls.append(tracking_call(results["tracking"].tracking, game, name))
        wall["tracking"] = round(time.perf_counter() - t, 1)
    summary = {
        "agent": name,
        "game": game,
        "mode": mode,
        "goals": {"A": goals[0], "B": goals[1]},
        "level_rule": rule,
        "levels": chosen,
        "rules_version": args.rules,
        "episodes": int(ro.num_episodes),
        "steps": int(ro.mask.sum()),
        "hooks": {"probes": hook, "tracking": args.track_hook},
        "settings": {**common, "permutations": args.permutations},
        "wall_s": wall,
        "calls": [dataclasses.asdict(c) for c in calls],
    }
    for stage, result in results.items():
        (args.out / f"{stage}.json").write_text(json.dumps(result.to_dict()))
    (args.out / "calls.json").write_text(json.dumps(summary, indent=1))
    for c in calls:
        print(json.dumps({"tool": c.tool, "agent": c.agent, "call": c.call}), flush=True)
    print(json.dumps({k: v for k, v in summary.items() if k != "calls"}), flush=True)


if __name__ == "__main__":
    main()
