"""The T-REX grid beside the published starpilot table, with the length control (docs/trex.md).

    python benchmarks/trex_table.py GRID.csv [PARITY.csv ...]

Reads 'proclab trex grid' summary CSVs and prints, per (game, mode of training, num-demos):
mean +- std over seeds of Spearman, Pearson, the partial Spearman given length and the Spearman
within length bins (with the +1/step baseline's, on the same test demos), test-pair accuracy
and the wall time of a cell, beside the procedural-generalization seed's published starpilot
Spearman (read off its figure, reference/trex_procgen.md section 9). One JSON line per row
first, then the same as a Markdown table. ``--runs`` adds one row per run with the 95% bootstrap
intervals over test demos that each run measured (the length control, per seed).
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict

import numpy as np

PUBLISHED_STARPILOT = {  # num_dems -> (Spearman mean, std), 5 seeds, held-out levels
    9: (-0.16, 0.27),
    12: (0.35, 0.35),
    15: (0.40, 0.44),
    25: (0.43, 0.49),
    50: (0.52, 0.54),
    100: (0.27, 0.54),
    200: (0.69, 0.43),
    300: (0.90, 0.05),
    500: (0.93, 0.03),
    1000: (0.95, 0.01),
}
PUBLISHED_BASELINE = 0.955
METRICS = (
    "spearman",
    "pearson",
    "partial_spearman",
    "binned_spearman",
    "baseline_binned_spearman",
    "baseline_spearman",
    "spearman_gain",
    "test_acc",
    "wall_seconds",
)


def cells(paths: list[str]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = defaultdict(list)
    for path in paths:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                mode = "parity" if r["batch_size"] == "1" else "batched"
                out[(r["env_name"], mode, int(r["num_dems"]))].append(r)
    return dict(sorted(out.items()))


def summarise(rows: list[dict]) -> dict:
    out = {"runs": len(rows), "test_demos": int(rows[0]["test_demos"])}
    for key in METRICS:
        v = np.array([float(r[key]) for r in rows if r.get(key) not in (None, "")])
        v = v[np.isfinite(v)]
        out[key] = (round(float(v.mean()), 3), round(float(v.std()), 3)) if len(v) else (None, None)
    return out


def fmt(pair) -> str:
    mean, std = pair
    return "n/a" if mean is None else f"{mean:+.2f} ± {std:.2f}"


def with_ci(r: dict, key: str) -> str:
    return f"{float(r[key]):+.2f} [{float(r[key + '_lo']):+.2f}, {float(r[key + '_hi']):+.2f}]"


def print_runs(groups: dict[tuple, list[dict]]) -> None:
    print(
        "\n| game | mode | demos | seed | Spearman | partial Sp. given length | Sp. in length bins "
        "| baseline in bins | Spearman - baseline | test pair acc | epochs | train / wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (game, mode, n), rows in groups.items():
        for r in sorted(rows, key=lambda r: int(r["seed"])):
            print(
                f"| {game} | {mode} | {n} | {r['seed']} | {with_ci(r, 'spearman')} | {with_ci(r, 'partial_spearman')} "
                f"| {with_ci(r, 'binned_spearman')} | {with_ci(r, 'baseline_binned_spearman')} "
                f"| {with_ci(r, 'spearman_gain')} | {float(r['test_acc']):.2f} | {r['epochs']} "
                f"| {float(r['train_seconds']):.0f} / {float(r['wall_seconds']):.0f} |"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="+", help="grid summary CSVs ('proclab trex grid --out')")
    parser.add_argument("--runs", action="store_true", help="also one row per run, with its bootstrap CIs")
    args = parser.parse_args(argv)
    groups = cells(args.csv)
    table = []
    for (game, mode, n), rows in groups.items():
        row = {"game": game, "mode": mode, "num_demos": n, **summarise(rows)}
        if game == "starpilot" and n in PUBLISHED_STARPILOT:
            row["published_spearman"] = PUBLISHED_STARPILOT[n]
        print(json.dumps(row))
        table.append(row)
    print()
    print(
        "| game | mode | demos | runs | Spearman | Pearson | partial Sp. given length | Sp. in length bins "
        "| baseline in bins | +1/step baseline Sp. | test pair acc | wall s / cell | published Sp. |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in table:
        published = r.get("published_spearman")
        print(
            f"| {r['game']} | {r['mode']} | {r['num_demos']} | {r['runs']} | {fmt(r['spearman'])} "
            f"| {fmt(r['pearson'])} | {fmt(r['partial_spearman'])} | {fmt(r['binned_spearman'])} "
            f"| {fmt(r['baseline_binned_spearman'])} | {fmt(r['baseline_spearman'])} | {fmt(r['test_acc'])} "
            f"| {r['wall_seconds'][0]:.0f} ± {r['wall_seconds'][1]:.0f} "
            f"| {fmt(published) if published else ''} |"
        )
    if any(r["game"] == "starpilot" for r in table):
        print(f"\npublished +1/step baseline (starpilot): Spearman about {PUBLISHED_BASELINE}")
    if args.runs:
        print_runs(groups)


if __name__ == "__main__":
    main()
