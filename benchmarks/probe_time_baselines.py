"""The probes' time baseline as it was and as it is, side by side on one ``analyze probe`` result.

Until 0.2 the time baseline read each step's index *and its episode's progress* (step / (length - 1)). Progress
needs the episode's length, known only at its end; where a goal lies at the level's end the offset to it is nearly
a function of progress, so that baseline read the target from the future. Since 0.2 it reads the step index and its
square. This script re-fits both on the very rows and folds of a saved ``analyze probe`` run (its store, its seeded
episode subset) and prints, per target, one JSON line: each baseline's held-out R², the probe's margin over each
(paired episode-bootstrap 95 % interval), and the strongest of the run's other controls, so a conclusion drawn
against the old baseline can be read against the new one. The recomputed new baseline must equal the run's own
``time_baseline`` (checked: the rows are the run's).

    python benchmarks/probe_time_baselines.py --data STORE --probe OUT/probe/summary.json [--max-steps 20000]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from proclab.interpret.bases.activations import episode_subset
from proclab.interpret.probes.linear import EpisodeSums, cross_validated, scored, time_features
from proclab.interpret.probes.targets import StoreTruth
from proclab.store import EpisodeStore

OTHER = ("random_agent", "control_task", "shuffled_labels", "constant")


def progress_features(episode: np.ndarray) -> np.ndarray:
    """``(N, 2)``: the step index and the episode's progress, step / (length - 1): the baseline before 0.2."""
    starts = np.flatnonzero(np.r_[True, episode[1:] != episode[:-1]])
    lengths = np.diff(np.r_[starts, len(episode)])
    step = (np.arange(len(episode)) - np.repeat(starts, lengths)).astype(np.float64)
    return np.stack([step, step / np.maximum(np.repeat(lengths, lengths) - 1, 1)], 1)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="the episode store the probes read")
    ap.add_argument("--probe", type=Path, required=True, help="its analyze probe summary.json")
    ap.add_argument("--max-steps", type=int, default=20_000, help="as the run was given (its default)")
    ap.add_argument("--seed", type=int, default=0, help="as the run was given")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args(argv)
    summary = json.loads(args.probe.read_text())
    store = EpisodeStore(args.data)
    episodes = episode_subset(store, args.max_steps, args.seed)
    truth = StoreTruth(store, episodes)
    episode = np.repeat(episodes, truth.lengths.astype(np.int64))
    for target, result in summary["probes"].items():
        y = truth.values(target)
        ok = np.isfinite(y)
        per = result["per_episode"]
        kept = {name: EpisodeSums.from_dict(per[name]) for name in ("probe", "time_baseline", *OTHER)}
        baselines = {"new": time_features(episode)[ok], "old": progress_features(episode)[ok]}
        fitted = {
            f"time_{name}": EpisodeSums.of(
                y[ok], cross_validated(x, y[ok], episode[ok], "ridge", args.folds), episode[ok], "ridge"
            )
            for name, x in baselines.items()
        }
        same = np.allclose(fitted["time_new"].sse, kept["time_baseline"].sse, rtol=1e-9, atol=1e-9)
        sums = {"probe": kept["probe"], **fitted, **{n: kept[n] for n in OTHER}}
        s = scored(sums, args.bootstrap, args.seed)
        strongest = max(OTHER, key=lambda n: s[n]["score"])
        row = {"target": target, "rows_are_the_runs": bool(same), "probe": s["probe"]["score"]}
        for name in ("time_old", "time_new", strongest):
            row[name] = {"r2": s[name]["score"], "probe_margin": s[name]["probe_margin"]}
        row["strongest_other_control"] = strongest
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
