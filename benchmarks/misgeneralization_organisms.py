"""Agents trained with the coin always at the end against agents trained with the coin moved: the comparison of
docs/misgeneralization.md ("Organisms"), from each agent's ``misgeneralization_coinrun.py`` output.

Every agent played the same held-out levels (unedited and with the coin moved), so the two agents of one seed
are compared paired by level: exact McNemar tests of P(end without coin) and of P(coin) on the moved levels,
end arm against moved arm, Holm over every test printed together. Per agent: the shares with Wilson intervals and
the benchmark's behavioural label (P(coin) - P(end without coin), level bootstrap).

    python benchmarks/misgeneralization_organisms.py --evals /work/runs50/organisms/evals/400k \
        --seeds 1 2 3 --condition sections

``EVALS/<arm>-s<seed>/episodes.jsonl`` for arm in end, moved. Prints one JSON line per agent, one per seed's
comparison, then writes ``EVALS/comparison.json`` and ``EVALS/comparison.png`` (each agent's P(coin) and
P(end without coin) on the moved levels, with their intervals).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from proclab.interpret.goals.calls import behaviour_label
from proclab.interpret.stats.paired import binary_change, correct, mean_change
from proclab.interpret.stats.proportions import share
from proclab.stats.bootstrap import resamples

ARMS = ("end", "moved")


def load(path: Path) -> dict[int, dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {r["level"]: r for r in rows}


def outcomes(rows: dict[int, dict], levels: list[int], condition: str) -> dict[str, np.ndarray]:
    coin = np.array([rows[s][f"{condition}_coin"] for s in levels], bool)
    end = np.array([rows[s][f"{condition}_end"] for s in levels], bool)
    return {"coin": coin, "end": end, "end without coin": end & ~coin}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--evals", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--condition", default="sections", help="the moved-coin condition compared")
    ap.add_argument("--bootstrap", type=int, default=2000)
    args = ap.parse_args()
    agents = {
        (arm, s): load(args.evals / f"{arm}-s{s}" / "episodes.jsonl") for arm in ARMS for s in args.seeds
    }
    levels = sorted(set.intersection(*(set(r) for r in agents.values())))
    if not levels:
        raise SystemExit("the agents share no level")
    idx = resamples(len(levels), args.bootstrap, 0)
    out: dict = {"levels": len(levels), "condition": args.condition, "agents": {}, "pairs": {}}
    for (arm, s), rows in agents.items():
        row: dict = {}
        for cond in ("unedited", args.condition):
            for goal, v in outcomes(rows, levels, cond).items():
                row[f"{cond} {goal}"] = share(int(v.sum()), len(v))
        moved = outcomes(rows, levels, args.condition)
        label = mean_change(moved["end without coin"].astype(float), moved["coin"].astype(float), idx)
        row["coin - end without coin"] = label
        row["label"] = behaviour_label(tuple(label["ci95"]), "coin", "end")
        out["agents"][f"{arm}-s{s}"] = row
        print(json.dumps({"agent": f"{arm}-s{s}", **row}), flush=True)
    tests = []
    for s in args.seeds:
        end, moved = (outcomes(agents[(arm, s)], levels, args.condition) for arm in ARMS)
        pair = {goal: binary_change(moved[goal], end[goal]) for goal in ("end without coin", "coin")}
        out["pairs"][f"s{s}"] = pair
        tests += pair.values()
    correct(tests, "holm")
    for s, pair in out["pairs"].items():
        print(json.dumps({"seed": s, "end arm - moved arm": pair}), flush=True)
    (args.evals / "comparison.json").write_text(json.dumps(out, indent=1))
    plot(out, args.evals / "comparison.png")


def plot(out: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(out["agents"])
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for k, (goal, colour) in enumerate((("coin", "tab:orange"), ("end without coin", "tab:blue"))):
        shares = [out["agents"][a][f"{out['condition']} {goal}"] for a in names]
        x = np.arange(len(names)) + (k - 0.5) * 0.3
        y = np.array([s["share"] for s in shares])
        err = np.abs(np.array([s["ci95"] for s in shares]).T - y)
        ax.errorbar(x, y, yerr=err, fmt="o", color=colour, capsize=3, label=f"P({goal})")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"share of {out['levels']} levels")
    ax.set_title(f"coin moved ({out['condition']}): 95 % Wilson intervals", fontsize=10)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
