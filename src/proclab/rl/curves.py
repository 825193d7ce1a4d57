"""Training curves of one or several runs as a PNG (``proclab plot``).

Runs are grouped by experiment (their ``<algo>/<game>/<name>`` path); the seeds of a group
are drawn as their mean with a +-1 std band, on the steps all of them reached. Training and
validation returns share a panel (solid and dashed), so overfitting to the training levels
shows as a gap.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from proclab.errors import ProclabError
from proclab.io.files import save_figure, subplots
from proclab.io.run_dirs import read_metrics

PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("episode return", ("charts/episodic_return", "charts/val_episodic_return")),
    ("episode length", ("charts/episodic_length", "charts/val_episodic_length")),
    ("normalised score", ("charts/normalized_score", "charts/val_normalized_score")),
    ("steps per second", ("charts/SPS",)),
    ("policy loss", ("losses/policy_loss",)),
    ("value loss", ("losses/value_loss",)),
    ("entropy", ("losses/entropy",)),
    ("approx. KL", ("losses/approx_kl",)),
)
LEARNED_REWARD_PANEL = ("learned-reward return", ("charts/proxy_episodic_return",))
"""Drawn when a run trained on a learned reward (``proclab train --reward-model``): its return under
that reward, on its own axis since its scale is the reward model's, not the game's."""


def group_runs(run_dirs: list[Path]) -> dict[str, list[Path]]:
    """Runs by experiment: ``runs/ppo/coinrun/default/<seed>-<time>`` -> ``ppo/coinrun/default``."""
    groups: dict[str, list[Path]] = defaultdict(list)
    for run in run_dirs:
        label = "/".join(run.resolve().parts[-4:-1]) or run.name
        groups[label].append(run)
    return dict(groups)


def mean_std(curves: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and std of several (steps, values) curves on the steps common to all of them."""
    stop = min(s[-1] for s, _ in curves)
    grid = np.unique(np.concatenate([s[s <= stop] for s, _ in curves]))
    values = np.stack([np.interp(grid, s, v) for s, v in curves])
    return grid, values.mean(0), values.std(0)


def panels_for(metrics: list[dict]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The panels to draw: the learned-reward return beside the true one when any run logged it."""
    if any(LEARNED_REWARD_PANEL[1][0] in m for m in metrics):
        return (PANELS[0], LEARNED_REWARD_PANEL, *PANELS[1:])
    return PANELS


def plot_runs(run_dirs: list[Path], out: Path, title: str | None = None) -> Path:
    if not run_dirs:
        raise ProclabError("give at least one run directory")
    groups = group_runs(run_dirs)
    data = {label: [read_metrics(r) for r in runs] for label, runs in groups.items()}
    panels = panels_for([m for metrics in data.values() for m in metrics])
    cols = math.ceil(len(panels) / 2)
    fig, axes = subplots(2, cols, figsize=(4.5 * cols, 7.5))
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax, (panel, keys) in zip(axes.flat, panels, strict=False):
        drawn = False
        for gi, (label, metrics) in enumerate(data.items()):
            for key in keys:
                curves = []
                for m in metrics:
                    if key in m:
                        s, v = np.asarray(m["step"]), np.asarray(m[key])
                        ok = ~np.isnan(v)
                        if ok.sum() >= 1:
                            curves.append((s[ok], v[ok]))
                if not curves:
                    continue
                style = "--" if "val_" in key else "-"
                name = f"{label}{' (val)' if 'val_' in key else ''}"
                if len(curves) > 1:
                    name += f" ({len(curves)} seeds)"
                grid, mean, std = mean_std(curves)
                ax.plot(grid, mean, style, color=f"C{gi}", label=name, lw=1.6)
                if len(curves) > 1:
                    ax.fill_between(grid, mean - std, mean + std, color=f"C{gi}", alpha=0.2)
                drawn = True
        ax.set_title(panel)
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
        if drawn:
            ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 3))
        else:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes, color="grey")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), frameon=False)
    fig.suptitle(title or ", ".join(groups))
    fig.tight_layout(rect=(0, 0.06 + 0.02 * math.ceil(len(labels) / 4), 1, 0.96))
    return save_figure(fig, out, dpi=110)
