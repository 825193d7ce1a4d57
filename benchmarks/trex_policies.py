"""The T-REX policy arms (docs/trex.md, "A policy on the learned reward"): PPO on the learned reward, on the
true reward and on +1 per step, several seeds each.

    python benchmarks/trex_policies.py RUNS [--steps N] [--plot OUT.png]

RUNS holds ``<arm>-s<seed>/<run>/metrics.csv`` for the arms ``trex``, ``true-reward`` and ``per-step`` (the
policy stage of benchmarks/trex_starpilot.sh writes them under ``$TREX/runs/ppo/starpilot``). Per run: the
training episodes' mean true return, learned-reward return and length over the first and the last 10% of its
steps. Per arm: mean and sd over seeds. Between arms: the exact two-sided permutation p of the last-10% true
return and length, over all splits of the pooled seeds. The seed is the unit, because the episodes of one run
share its policy. The six tests are reported together, so they are Holm-adjusted together. An exact test's
smallest p is 2 / C(2n, n) for n + n seeds: 0.10 for 3 + 3 and 0.008 for 5 + 5, which is why the stage trains 5.
Only runs trained to ``--steps`` count, so a table made while some seeds still train holds the finished ones.
One JSON line per arm pair and measure, then Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from proclab.io.files import save_figure, subplots
from proclab.io.run_dirs import read_metrics
from proclab.rl.curves import mean_std
from proclab.stats.corrections import holm
from proclab.stats.permutation import exact_permutation_p

ARMS = {"trex": "learned reward", "true-reward": "true reward", "per-step": "+1 per step"}
MEASURES = {
    "true": "charts/episodic_return",
    "learned": "charts/proxy_episodic_return",
    "length": "charts/episodic_length",
}
PAIRS = (("trex", "per-step"), ("trex", "true-reward"), ("per-step", "true-reward"))
TESTED = ("true", "length")  # the learned-reward returns are on each reward model's own scale


def windows(metrics: dict[str, list[float]]) -> dict[str, float]:
    """Each measure's mean over the logged rows in the first and the last 10% of a run's steps."""
    steps = np.asarray(metrics["step"], np.float64)
    end = steps.max()
    out = {"steps": int(end)}
    for name, key in MEASURES.items():
        values = np.asarray(metrics.get(key, [np.nan] * len(steps)), np.float64)
        for part, (lo, hi) in (("first", (0.0, 0.1 * end)), ("last", (0.9 * end, end))):
            picked = values[(steps > lo) & (steps <= hi) & ~np.isnan(values)]
            out[f"{name}_{part}"] = float(picked.mean()) if len(picked) else float("nan")
    return out


def arm_metrics(root: Path, steps: int) -> dict[str, dict[str, dict[str, list[float]]]]:
    """arm -> seed directory name -> the metrics of its newest run, if trained to ``steps`` (seeds still
    training left out). Read once: the table and the plot share them."""
    arms: dict[str, dict[str, dict[str, list[float]]]] = {arm: {} for arm in ARMS}
    for arm in ARMS:
        for seed_dir in sorted(root.glob(f"{arm}-s*")):
            runs = sorted(p for p in seed_dir.iterdir() if (p / "metrics.csv").is_file())
            metrics = read_metrics(runs[-1]) if runs else None
            if metrics and max(metrics["step"]) >= steps:
                arms[arm][seed_dir.name] = metrics
    return arms


def compare(results: dict[str, dict[str, dict]]) -> list[dict]:
    """The exact permutation test of every arm pair on each tested measure, Holm-adjusted together."""
    tests = []
    for a, b in PAIRS:
        if len(results[a]) >= 2 and len(results[b]) >= 2:
            for name in TESTED:
                x = [w[f"{name}_last"] for w in results[a].values()]
                y = [w[f"{name}_last"] for w in results[b].values()]
                tests.append(
                    {
                        "arms": [a, b],
                        "measure": name,
                        "seeds": [len(x), len(y)],
                        "means": [np.mean(x), np.mean(y)],
                        "difference": float(np.mean(x) - np.mean(y)),
                        "p": exact_permutation_p(x, y),
                    }
                )
    for test, adjusted in zip(tests, holm([t["p"] for t in tests]) if tests else [], strict=True):
        test["p_holm"] = float(adjusted)
    return tests


def plot(arms: dict[str, dict[str, dict[str, list[float]]]], out: Path) -> Path:
    """True return and length over training, each arm's seeds as mean +- sd."""
    fig, axes = subplots(1, 2, figsize=(10, 3.8))
    for arm, runs in arms.items():
        if not runs:
            continue
        metrics = list(runs.values())
        for ax, key in zip(axes, (MEASURES["true"], MEASURES["length"]), strict=True):
            curves = []
            for m in metrics:
                s, v = np.asarray(m["step"]), np.asarray(m[key])
                curves.append((s[~np.isnan(v)], v[~np.isnan(v)]))
            grid, mean, sd = mean_std(curves)
            (line,) = ax.plot(grid, mean, lw=1.6, label=f"{ARMS[arm]} ({len(curves)} seeds)")
            ax.fill_between(grid, mean - sd, mean + sd, color=line.get_color(), alpha=0.2)
    for ax, title in zip(axes, ("true return (training episodes)", "episode length"), strict=True):
        ax.set_title(title)
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    axes[0].legend(frameon=False, fontsize=8)
    fig.suptitle("PPO on the learned reward, the true reward and +1 per step (mean +- sd over seeds)")
    fig.tight_layout()
    return save_figure(fig, out, dpi=110)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, help="the directory holding <arm>-s<seed>/<run>/")
    parser.add_argument(
        "--steps", type=int, default=249_856, help="the steps a run must have reached to count"
    )
    parser.add_argument("--plot", type=Path, help="also draw the arms' curves into this PNG")
    args = parser.parse_args(argv)
    if not args.runs.is_dir():
        parser.error(f"no directory {str(args.runs)!r}")
    arms = arm_metrics(args.runs, args.steps)
    results = {arm: {seed: windows(metrics) for seed, metrics in runs.items()} for arm, runs in arms.items()}
    tests = compare(results)
    for test in tests:
        print(json.dumps({k: (np.round(v, 4).tolist() if k == "means" else v) for k, v in test.items()}))
    print(
        "\n| arm | run | steps | true return, first / last 10% | learned-reward return, first / last | "
        "length, first / last |\n|---|---|---|---|---|---|"
    )
    for arm, runs in results.items():
        for seed, w in runs.items():
            learned = (
                "-" if np.isnan(w["learned_last"]) else f"{w['learned_first']:.2f} / {w['learned_last']:.2f}"
            )
            print(
                f"| {ARMS[arm]} | {seed} | {w['steps']:,} | {w['true_first']:.2f} / {w['true_last']:.2f} | "
                f"{learned} | {w['length_first']:.0f} / {w['length_last']:.0f} |"
            )
    print(
        "\n| arm | seeds | true return, last 10% (mean ± sd) | length, last 10% (mean ± sd) |\n|---|---|---|---|"
    )
    for arm, runs in results.items():
        if len(runs) >= 2:
            t, n = [w["true_last"] for w in runs.values()], [w["length_last"] for w in runs.values()]
            print(
                f"| {ARMS[arm]} | {len(t)} | {statistics.fmean(t):.2f} ± {statistics.stdev(t):.2f} | "
                f"{statistics.fmean(n):.1f} ± {statistics.stdev(n):.1f} |"
            )
    print(
        f"\n| arms | measure | seeds | means | exact p | Holm over {len(tests)} |\n|---|---|---|---|---|---|"
    )
    for t in tests:
        a, b = (ARMS[arm] for arm in t["arms"])
        print(
            f"| {a} vs {b} | {t['measure']} | {t['seeds'][0]} + {t['seeds'][1]} | "
            f"{t['means'][0]:.2f} vs {t['means'][1]:.2f} | {t['p']:.3f} | {t['p_holm']:.3f} |"
        )
    if args.plot:
        print(plot(arms, args.plot))


if __name__ == "__main__":
    main()
