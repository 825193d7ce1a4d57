"""The skill spread of a T-REX demo store: returns per split and per checkpoint (docs/trex.md).

    python benchmarks/trex_demos.py DEMOS [--game starpilot]

T-REX learns from demos that differ in skill, and the +1/step baseline is only as strong as
length predicts return. This prints, per split, the returns' spread and the Spearman of length
against return (the baseline's whole strength), then the mean return of each checkpoint that
played demos. One JSON line per row first, then the same as Markdown tables.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from proclab.stats.correlation import spearman
from proclab.store import EpisodeStore


def spread(returns: np.ndarray, lengths: np.ndarray, truncated: np.ndarray) -> dict:
    q = np.percentile(returns, [10, 50, 90])
    return {
        "demos": len(returns),
        "return_mean": round(float(returns.mean()), 2),
        "return_p10_p50_p90": [round(float(v), 1) for v in q],
        "return_min_max": [round(float(returns.min()), 1), round(float(returns.max()), 1)],
        "length_p10_p50_p90": [int(v) for v in np.percentile(lengths, [10, 50, 90])],
        "truncated": int(truncated.sum()),
        "spearman_length_return": round(spearman(lengths, returns), 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("demos", help="demo store written by 'proclab trex demos'")
    parser.add_argument("--game", default=None, help="only this game's demos (default: all)")
    args = parser.parse_args(argv)
    t = EpisodeStore(args.demos).episodes
    keep = np.ones(len(t["return"]), bool) if args.game is None else np.asarray(t["game"]) == args.game
    returns = np.asarray(t["return"], float)[keep]
    lengths = np.asarray(t["length"], float)[keep]
    truncated = np.asarray(t["truncated"], bool)[keep]
    splits = np.asarray(t["split"])[keep]
    steps = np.asarray(t["checkpoint_step"])[keep]
    rows = []
    for split in sorted(set(splits)):
        m = splits == split
        rows.append({"split": split, **spread(returns[m], lengths[m], truncated[m])})
        print(json.dumps(rows[-1]))
    per_ckpt = []
    for step in sorted(set(steps)):
        m = steps == step
        per_ckpt.append(
            {
                "checkpoint_step": int(step),
                "demos": int(m.sum()),
                "return_mean": round(float(returns[m].mean()), 2),
            }
        )
        print(json.dumps(per_ckpt[-1]))
    print(
        "\n| split | demos | return mean | p10 / median / p90 | min / max | length p10 / median / p90 "
        "| cut at max length | Spearman(length, return) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        q, mm, lq = r["return_p10_p50_p90"], r["return_min_max"], r["length_p10_p50_p90"]
        print(
            f"| {r['split']} | {r['demos']} | {r['return_mean']:.2f} | {q[0]:g} / {q[1]:g} / {q[2]:g} "
            f"| {mm[0]:g} / {mm[1]:g} | {lq[0]} / {lq[1]} / {lq[2]} | {r['truncated']} "
            f"| {r['spearman_length_return']:+.2f} |"
        )
    print("\n| checkpoint step | demos | mean return |\n|---|---|---|")
    for r in per_ckpt:
        print(f"| {r['checkpoint_step']:,} | {r['demos']} | {r['return_mean']:.2f} |")


if __name__ == "__main__":
    main()
