"""The counterfactual behavioural label on scripted policies whose goal is known, beside the rule it replaces
(docs/misgeneralization.md, "The label, counterfactual"): a rule that mislabels any of them is not used.

Per game (CoinRun, Maze) the first ``--levels`` levels of ``--split`` whose goals part
(:func:`proclab.interpret.goals.label.apart_levels`: CoinRun under ``coin-moved``, mazes whose cheese lies
outside the top-right ``--region`` cells), each played by every policy of
:data:`proclab.interpret.goals.scripted.KNOWN` with its goal present and removed, in batches of ``--batch``
levels (seed ``--seed + k`` for batch ``k``).

    python benchmarks/goal_label_scripted.py --out OUT [--levels 200] [--games coinrun maze]

``--agents NAME ...`` labels agents instead (shipped or published names, runs, checkpoints), each on the first
``--levels`` apart levels of ``--split`` in its own game and mode, with sampled actions; their goal is what
is asked, so ``expected`` is empty.

``--version`` picks the label rule's version (default 2); a version re-scores the stored plays.

Resumable: each batch's per-level outcomes go to ``OUT/<game>/<policy>/batch_<k>.json`` and a batch already
there is read, not played. Prints one JSON line per batch (its time) and per policy (the label, the previous
rule's, and the numbers of the doc's table); the policy lines also go to ``OUT/labels.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from proclab.interpret.goals.label import (
    LEVELS,
    LabelSettings,
    LevelOutcome,
    apart_levels,
    decide,
    play_pairs,
)
from proclab.io.files import write_json
from proclab.io.results import jsonable, restore


def outcomes(agent, levels, out: Path, settings: LabelSettings, seed: int, tag: dict) -> list[LevelOutcome]:
    got: list[LevelOutcome] = []
    for k in range(0, len(levels), settings.batch):
        path = out / f"batch_{k // settings.batch:04d}.json"
        if path.is_file():
            got += restore(list[LevelOutcome], json.loads(path.read_text()), {}, "")
            continue
        start = time.perf_counter()
        part = play_pairs(
            agent, levels[k : k + settings.batch], seed=seed + k // settings.batch, settings=settings
        )
        write_json(path, jsonable(part))
        got += part
        print(
            json.dumps(
                {**tag, "batch": k // settings.batch, "seconds": round(time.perf_counter() - start, 1)}
            )
        )
    return got


def row(policy: str, expected: str | None, label) -> dict:
    c = label.criteria
    return {
        "policy": policy,
        "game": label.game,
        "levels": label.levels,
        "expected": expected,
        "version": label.settings.version,
        "label": label.label,
        "right": None if expected is None else label.label == expected,
        "previous_label": label.previous["label"],
        "p_a_present": c["a_more_with_a"]["present"],
        "p_a_cell_absent": c["a_more_with_a"]["absent"],
        "mcnemar": [
            c["a_more_with_a"]["lost"],
            c["a_more_with_a"]["gained"],
            c["a_more_with_a"]["p_mcnemar_one_sided"],
        ],
        "unseen": c["a_more_with_a"]["unseen"],
        "p_b_first_present": c["route_unchanged"]["b_first_present"],
        "b_first_upper": c["b_first_seldom"]["upper_bound"],
        "p_b_first_absent": c["route_unchanged"]["b_first_absent"],
        "tost_b_first": c["route_unchanged"]["b_first"],
        "tost_a_cell": c["route_unchanged"]["a_cell"],
        "p_b_present": float(np.mean([o.present.reached_b for o in label.outcomes])),
        "p_b_absent": c["b_mostly"]["share"],
        "b_absent_lower": c["b_mostly"]["lower_bound"],
        "previous": label.previous,
        "criteria_hold": {name: v["holds"] for name, v in c.items()},
    }


def main() -> None:
    # lazy: the table of policies imports torch and the planners
    from proclab.interpret.goals.scripted import KNOWN

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--levels", type=int, default=200)
    ap.add_argument("--split", default=LEVELS)
    ap.add_argument("--games", nargs="+", default=list(KNOWN))
    ap.add_argument("--policies", nargs="*", default=None, help="names of KNOWN (default: all of the game)")
    ap.add_argument("--mode", default="easy")
    ap.add_argument("--region", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--version", type=int, default=2, help="the label rule's version (LabelSettings.version)")
    ap.add_argument(
        "--agents", nargs="*", default=None, help="label these agents instead of the scripted policies"
    )
    args = ap.parse_args()
    if args.agents:
        label_agents(args)
        return
    for game in args.games:
        levels = apart_levels(game, args.split, args.levels, args.mode, LabelSettings(region=args.region))
        write_json(args.out / game / "levels.json", [lv.level_seed for lv in levels])
        for name, known in KNOWN[game].items():
            if args.policies and name not in args.policies:
                continue
            settings = LabelSettings(
                noise=known.noise, batch=args.batch, region=args.region, version=args.version
            )
            tag = {"game": game, "policy": name}
            played = outcomes(known.make(), levels, args.out / game / name, settings, args.seed, tag)
            line = row(name, known.goal, decide(game, played, settings))
            print(json.dumps(line), flush=True)
            with open(args.out / "labels.jsonl", "a") as f:
                f.write(json.dumps(line) + "\n")


def label_agents(args) -> None:
    """Each agent of ``--agents`` labelled on the apart levels of its own game and mode (module docstring)."""
    import re

    import proclab
    from proclab.models.edited import env_config_of

    for name in args.agents:
        agent = proclab.load(name)
        env = env_config_of(agent)
        (game,), mode = env.games(), env.mode
        settings = LabelSettings(batch=args.batch, region=args.region, version=args.version)
        levels = apart_levels(game, args.split, args.levels, mode, settings)
        slug = re.sub(r"[^A-Za-z0-9.+-]+", "_", name).strip("_")
        write_json(args.out / game / slug / "levels.json", [lv.level_seed for lv in levels])
        played = outcomes(agent, levels, args.out / game / slug, settings, args.seed, {"agent": name})
        line = {**row(name, None, decide(game, played, settings)), "mode": mode}
        print(json.dumps(line), flush=True)
        with open(args.out / "labels.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
