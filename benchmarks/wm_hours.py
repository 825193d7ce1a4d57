"""A world-model run's error-vs-hours curve: every evaluation of the run, against its hours of training.

Reads each ``RUN/eval-*/evaluation.json`` (``proclab wm evaluate RUN --out RUN/eval-LABEL``), finds the hours of
training at its checkpoint in ``RUN/metrics.csv`` (cumulative ``wall_time`` of training, across resumed
sessions), prints one JSON line per evaluation and draws ``--plot``: the closed-loop frame error at a few
horizons with both baselines, the steps k at which the closed loop beats the better baseline (paired interval
below 0), the reward AUCs and the drift, each against hours. What "the next hour of training buys" is the slope
of the last two points.

    python benchmarks/wm_hours.py RUN --plot hours.png [--evals 'eval-*-sampled']
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from proclab.io.files import save_figure

HORIZONS = (1, 4, 8, 16)


def hours_at(metrics: Path) -> dict[int, float]:
    """Training hours at every logged update of the run."""
    with open(metrics) as f:
        return {int(row["step"]): float(row["wall_time"]) / 3600 for row in csv.DictReader(f)}


def point(result: dict, hours: dict[int, float]) -> dict:
    """One evaluation as one JSON line."""
    updates = int(result["updates"])
    logged = [s for s in hours if s <= updates]
    mse, reward, drift = result["mse"], result["reward"], result["drift"] or {}
    closed = mse["mean"]["closed loop"]
    diff = mse["minus_better_baseline"]["closed loop"]
    line = {
        "updates": updates,
        "hours": round(hours[max(logged)], 3) if logged else None,
        "beats_better_baseline_at": [k + 1 for k, d in enumerate(diff) if d and d["ci95"][1] < 0],
    }
    for k in [k for k in HORIZONS if k <= len(closed)]:
        line[f"closed_k{k}"] = closed[k - 1]["mean"]
        line[f"repeat_k{k}"] = mse["mean"]["repeat last frame"][k - 1]["mean"]
        # the better fair mean frame (evaluations before they existed: the oracle level mean they judged by)
        fair = [n for n in ("past mean frame", "other episodes' mean frame") if n in mse["mean"]]
        line[f"mean_frame_k{k}"] = min(mse["mean"][n][k - 1]["mean"] for n in fair or ["level mean frame"])
    for mode in ("teacher-forced", "open loop", "closed loop"):
        if mode in reward:
            line[f"auc_{mode.replace(' ', '_').replace('-', '_')}"] = reward[mode]["auc"]
    for mode in ("closed loop", "dream"):
        if mode in drift:
            line[f"drift_{mode.replace(' ', '_')}"] = drift[mode]["median_ratio"]
    return line


def plot(points: list[dict], path: Path) -> Path:
    hours = [p["hours"] for p in points]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for k, colour in zip(HORIZONS, ("C0", "C1", "C2", "C3"), strict=True):
        if f"closed_k{k}" not in points[0]:
            continue
        ax.plot(hours, [p[f"closed_k{k}"] for p in points], "o-", color=colour, label=f"closed loop k={k}")
        best = [min(p[f"repeat_k{k}"], p[f"mean_frame_k{k}"]) for p in points]
        ax.plot(hours, best, ":", color=colour, label=f"better baseline k={k}")
    ax.set(xlabel="hours of training", ylabel="frame MSE", title="closed loop against the better baseline")
    ax.legend(fontsize=7)
    ax = axes[1]
    ax.plot(hours, [max(p["beats_better_baseline_at"], default=0) for p in points], "o-")
    ax.set(xlabel="hours of training", ylabel="last k", ylim=(0, 16.5), title="beats both baselines up to k")
    ax = axes[2]
    for key in [k for k in points[-1] if k.startswith(("auc_", "drift_"))]:
        ax.plot(hours, [p.get(key, float("nan")) for p in points], "o-", label=key)
    ax.axhline(0.8, color="grey", lw=0.5)
    ax.axhline(1.3, color="grey", lw=0.5)
    ax.set(xlabel="hours of training", title="reward AUC (goal >= 0.8), drift (goal <= 1.3)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="world-model run directory")
    parser.add_argument("--plot", type=Path, default=None, help="PNG of the curves")
    parser.add_argument(
        "--evals",
        default="eval-*",
        help="which evaluation folders of RUN, a glob (eval-*-sampled: one closed-loop mode per point)",
    )
    args = parser.parse_args()
    hours = hours_at(args.run / "metrics.csv")
    results = [json.loads(p.read_text()) for p in sorted(args.run.glob(f"{args.evals}/evaluation.json"))]
    points = sorted((point(r, hours) for r in results), key=lambda p: p["updates"])
    for p in points:
        print(json.dumps(p))
    if args.plot is not None and points:
        plot(points, args.plot)


if __name__ == "__main__":
    main()
