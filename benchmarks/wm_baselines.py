"""The frame-error baselines of ``proclab wm evaluate`` on a store, without a world model: repeating the last
frame, the past mean frame and the other episodes' mean frame (the fair ones) and the level mean frame (the
oracle, which has seen the frames it predicts), per step k, with episode-clustered intervals, and the paired
difference of the oracle to the better fair baseline at that k (the bar ``wm evaluate`` judges by).

The windows are those ``wm evaluate`` picks for a model with ``--init`` initial frames (the ``cpu`` preset: 3)
and the same ``--horizon``, ``--windows`` and ``--seed``, so the numbers stand beside an evaluation's table.

    python benchmarks/wm_baselines.py STORE --horizon 16 --windows 1024 --out baselines.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from proclab.store import EpisodeStore
from proclab.store.windows import WindowDataset
from proclab.worldmodel.clustered import clustered_mean
from proclab.worldmodel.frame_error import fair_mean_frames, frame_total, level_mean_frames


def baselines(store: EpisodeStore, horizon: int, windows: int, init: int, seed: int) -> dict:
    dataset = WindowDataset(store, init + horizon, stride=1, fields=["obs"], min_steps=init)
    picks = np.sort(
        np.random.default_rng(seed).choice(len(dataset), min(windows, len(dataset)), replace=False)
    )
    episodes = dataset.episode_ids[picks]
    last = dataset.offsets[picks] + init - 1
    oracle = level_mean_frames(store)
    levels = store.episodes["level_seed"]
    fair = fair_mean_frames(store, episodes, last, frame_total(store))
    names = ("repeat last frame", *fair, "oracle")
    err = {name: np.full((len(picks), horizon), np.nan) for name in names}
    for i, (e, t) in enumerate(zip(episodes.tolist(), last.tolist(), strict=True)):
        obs = store.read(e, ["obs"])["obs"].astype(np.float32) / 255
        for k in range(1, horizon + 1):
            if t + k >= len(obs):
                break
            true = obs[t + k]
            err["repeat last frame"][i, k - 1] = np.square(obs[t] - true).mean()
            for name, mean in fair.items():
                err[name][i, k - 1] = np.square(mean[i] - true).mean()
            err["oracle"][i, k - 1] = np.square(oracle[int(levels[e])] - true).mean()
    table = {name: [clustered_mean(e[:, k], episodes) for k in range(horizon)] for name, e in err.items()}
    table["oracle minus the better fair baseline"] = []
    for k in range(horizon):
        best = min(("repeat last frame", *fair), key=lambda name: table[name][k]["mean"])
        table["oracle minus the better fair baseline"].append(
            {"baseline": best, **clustered_mean(err["oracle"][:, k] - err[best][:, k], episodes)}
        )
    return {
        "store": str(store.path),
        "windows": len(picks),
        "episodes": len(np.unique(episodes)),
        "levels": len(np.unique(levels[episodes])),
        "table": table,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("store", type=Path)
    parser.add_argument("--horizon", type=int, default=16)
    parser.add_argument("--windows", type=int, default=1024)
    parser.add_argument("--init", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    a = parser.parse_args()
    result = baselines(EpisodeStore(a.store), a.horizon, a.windows, a.init, a.seed)
    print(f"{result['windows']} windows, {result['episodes']} episodes, {result['levels']} levels")
    for k in sorted({1, 4, 8, 12, a.horizon}):
        cells = {name: result["table"][name][k - 1] for name in result["table"]}
        print(f"k={k:2d} better fair baseline: {cells['oracle minus the better fair baseline']['baseline']}")
        print(
            f"k={k:2d} "
            + "  ".join(
                f"{name} {c['mean']:.4f} [{c['ci95'][0]:+.4f}, {c['ci95'][1]:+.4f}]"
                for name, c in cells.items()
            )
        )
    if a.out:
        a.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
