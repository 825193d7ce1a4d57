"""The T-REX study's two figures, saved to files (``proclab trex plot``; the seed only showed them).

* **Correlation bars** from a grid CSV (or ``rm_infos.csv``): per game, mean Spearman and
  Pearson over seeds for each number of demos, with std error bars, and the +1/step baseline
  as dashed lines (it is the same for every run of a game: length vs return on the test demos).
  Summaries with the length control (:mod:`proclab.reward.control`) add bars of the partial
  Spearman given length and the Spearman within length bins, with the baseline's binned
  Spearman dashed: bars above it mean the reward ranks demos of equal length by their return.
* **Reward predictions** of one reward model: on test demos longer than 100 steps (sampled
  without replacement; the seed drew with replacement and plotted 6 of its 12), the cumulative
  true reward beside the cumulative predicted reward times ``c = sum true / sum predicted``
  over the plotted demos (the seed took ``c`` from its first demo only).
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

from proclab.errors import ProclabError
from proclab.io.files import save_figure, subplots
from proclab.io.run_dirs import read_run_config
from proclab.reward.demo_reader import demo_table, open_store, read_demos
from proclab.reward.nets import load_reward_model, predict_rewards
from proclab.run.runtime import Runtime


def read_rows(path: Path) -> list[dict]:
    if not path.is_file():
        raise ProclabError(
            f"no summary CSV at {str(path)!r}; run 'proclab trex grid' or 'proclab trex train' first"
        )
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise ProclabError(f"T-REX summary {str(path)!r} is unreadable ({err})") from None
    if not rows or "spearman" not in rows[0]:
        raise ProclabError(f"{str(path)!r} holds no T-REX summary rows")
    return rows


BARS = ("spearman", "pearson", "partial_spearman", "binned_spearman")
"""Bars of the correlation plot, each with its dashed baseline where it has one."""
BASELINES = {
    "spearman": "baseline_spearman",
    "pearson": "baseline_pearson",
    "binned_spearman": "baseline_binned_spearman",
}


def finite_mean_std(values) -> tuple[float, float]:
    """Mean and std of the defined values (a correlation is NaN where an input was constant); NaN if none."""
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    return (float(v.mean()), float(v.std())) if len(v) else (float("nan"), float("nan"))


def correlation_table(rows: list[dict]) -> dict[str, dict[int, dict[str, tuple[float, float, int]]]]:
    """game -> num_dems -> metric -> (mean, std, runs) for the bars and baselines the rows have."""
    cells: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for r in rows:
        cells[(r["env_name"], int(r["num_dems"]))].append(r)
    out: dict = defaultdict(dict)
    for (game, n), rs in sorted(cells.items()):
        out[game][n] = {}
        for key in (*BARS, *BASELINES.values()):
            if rs[0].get(key) in (None, ""):
                continue
            mean, std = finite_mean_std([float(r[key]) for r in rs])
            out[game][n][key] = (mean, std, len(rs))
    return dict(out)


def plot_correlations(rows: list[dict], out_dir: Path) -> list[Path]:
    paths = []
    for game, by_n in correlation_table(rows).items():
        ns = sorted(by_n)
        x = np.arange(len(ns))
        bars = [key for key in BARS if all(key in by_n[n] for n in ns)]
        width = 0.8 / len(bars)
        fig, ax = subplots(figsize=(0.6 * len(bars) * len(ns) + 3, 4))
        for k, key in enumerate(bars):
            mean = [by_n[n][key][0] for n in ns]
            std = [by_n[n][key][1] for n in ns]
            label = key.replace("_", " ").capitalize()
            ax.bar(
                x + (k - (len(bars) - 1) / 2) * width,
                mean,
                width,
                yerr=std,
                capsize=3,
                color=f"C{k}",
                label=label,
            )
            if key in BASELINES:
                base = finite_mean_std([by_n[n][BASELINES[key]][0] for n in ns])[0]
                ax.axhline(
                    base, color=f"C{k}", ls="--", lw=1.2, label=f"+1/step baseline ({label}) {base:.2f}"
                )
        runs = {by_n[n]["spearman"][2] for n in ns}
        ax.set_xticks(x, [str(n) for n in ns])
        ax.set_xlabel("training demos")
        ax.set_ylabel("correlation with true return")
        ax.set_ylim(-1, 1.05)
        ax.set_title(
            f"T-REX on {game}: held-out-level demos (mean ± std over {'/'.join(map(str, sorted(runs)))} seeds)"
        )
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        paths.append(save_figure(fig, out_dir / f"correlations_{game}.png", dpi=110))
    return paths


def plot_predictions(
    reward_model: Path,
    out_dir: Path,
    runtime: Runtime,
    demos_path: Path | None = None,
    panels: int = 6,
    min_length: int = 100,
    seed: int = 0,
) -> Path:
    """Cumulative true vs (scaled) predicted reward on sampled test demos of ``reward_model``'s game, the
    predictions computed on ``runtime``."""
    net, ckpt = load_reward_model(reward_model)
    net = runtime.prepare(net)
    if demos_path is None:  # the store the model was trained on, from its run's config.json
        demos_path = Path(read_run_config(ckpt.path.parents[1])["demos"])
    store = open_store(demos_path)
    game, table = demo_table(store, ckpt.meta["game"], ckpt.meta.get("mode"))
    eligible = np.flatnonzero((table["split"] == "test") & (table["length"] > min_length))
    if len(eligible) == 0:
        raise ProclabError(f"no {game} test demos longer than {min_length} steps in {str(demos_path)!r}")
    rng = np.random.default_rng(seed)
    pick = rng.choice(eligible, min(panels, len(eligible)), replace=False)
    demos = read_demos(store, table["index"][pick])
    pred = predict_rewards(net, demos.frames, runtime)
    true = demos.rewards.astype(np.float64)
    scale = abs(true.sum() / pred.sum()) if pred.sum() != 0 else 1.0
    cols = min(3, len(pick))
    fig, axes = subplots(
        (len(pick) + cols - 1) // cols,
        cols,
        figsize=(4.2 * cols, 3.2 * ((len(pick) + cols - 1) // cols)),
        squeeze=False,
    )
    for i, ax in enumerate(axes.flat):
        if i >= len(pick):
            ax.axis("off")
            continue
        lo, n = demos.offsets[i], demos.lengths[i]
        ax.plot(np.cumsum(true[lo : lo + n]), label="true")
        ax.plot(np.cumsum(pred[lo : lo + n]) * scale, label=f"predicted x {scale:.3g}")
        ax.set_title(f"demo {demos.ids[i]} (return {demos.returns[i]:g})", fontsize=9)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"{game}: cumulative reward, reward model {ckpt.path.parents[1].name}")
    fig.tight_layout()
    return save_figure(fig, out_dir / f"reward_predictions_{game}.png", dpi=110)
