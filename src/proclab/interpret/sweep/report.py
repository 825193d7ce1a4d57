"""The sweep's table (text and CSV, sorted by effect size) and its figure (changes per direction and arm)."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import numpy as np

from proclab.interpret.sweep.stats import TV

COLUMNS = ("return", "level_complete", "length", TV)
HEADS = {"return": "d return", "level_complete": "d complete", "length": "d length", TV: "TV actions"}


def _estimate(metric: dict) -> float:
    return metric["value"] if "value" in metric else metric["change"]


def _cell(metric: dict) -> str:
    """``-2.31 [-3.10, -1.52]*``: estimate, corrected CI, a star when significant after correction."""
    lo, hi = metric["ci_corrected"]
    star = "*" if metric["significant"] else " "
    return f"{_estimate(metric):+.3g} [{lo:+.3g}, {hi:+.3g}]{star}"


def table_rows(summary: dict, label: str) -> list[list[str]]:
    """One row per (direction, arm), in the summary's order (sorted by effect size)."""
    rows = []
    for rank, r in enumerate(summary["results"], start=1):
        e = r["edit"]
        place = f"{e['percentile']:.1f}" + (" off" if e["off_data"] else "")
        rows.append(
            [str(rank), f"{label} {r['direction']}", r["arm"], f"{e['value']:.3g}", place]
            + [_cell(r[c]) for c in COLUMNS]
        )
    return rows


def table_text(summary: dict, label: str) -> str:
    """The table as printed: aligned columns, a header saying what the cells hold."""
    head = ["#", "direction", "arm", "held at", "percentile"] + [HEADS[c] for c in COLUMNS]
    rows = [head, *table_rows(summary, label)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    corr = summary["correction"]
    note = (
        f"changes against the baseline on {len(summary['levels'])} paired levels, with intervals corrected "
        f"by {corr['name']} over {corr['tests_per_family']} directions per arm and metric "
        f"(* significant at {corr['alpha']}); sorted by |change| in {summary['sort']}; "
        f"'off': the held value lies outside the recorded 0.5-99.5 % range"
    )
    return "\n".join([note, *lines]) + "\n"


def table_csv(summary: dict, label: str) -> str:
    """Machine-readable: per (direction, arm) and metric, estimate, corrected CI, adjusted p, significance."""
    buf = io.StringIO()
    w = csv.writer(buf)
    head = ["rank", "direction", "arm", "held_value", "percentile", "off_data"]
    for c in COLUMNS:
        head += [c, f"{c}_ci_lo", f"{c}_ci_hi", f"{c}_p_adjusted", f"{c}_significant"]
    w.writerow(head)
    for rank, r in enumerate(summary["results"], start=1):
        e = r["edit"]
        row = [rank, f"{label} {r['direction']}", r["arm"], e["value"], e["percentile"], e["off_data"]]
        for c in COLUMNS:
            m = r[c]
            row += [_estimate(m), *m["ci_corrected"], m["p_adjusted"], m["significant"]]
        w.writerow(row)
    return buf.getvalue()


def write_text_atomic(path: Path, text: str) -> Path:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def figure(summary: dict, label: str, path: Path) -> Path:
    """One heat map per metric: directions (rows) by arms (columns), the change (TV: the distance);
    ``*`` significant after correction, ``o`` held off the data."""
    from proclab.interpret.workspace.figures import _plt, save_tight

    plt = _plt()
    directions, arms = summary["directions"], list(summary["arms"])
    at = {(r["direction"], r["arm"]): r for r in summary["results"]}
    fig, axes = plt.subplots(
        1, len(COLUMNS), figsize=(1.2 + len(COLUMNS) * (0.55 * len(arms) + 1.4), 1.5 + 0.3 * len(directions))
    )
    for ax, metric in zip(axes, COLUMNS, strict=True):
        grid = np.array([[_estimate(at[d, a][metric]) for a in arms] for d in directions])
        top = float(np.abs(grid).max()) or 1.0
        cmap, lo = ("viridis", 0.0) if metric == TV else ("RdBu_r", -top)
        im = ax.imshow(grid, cmap=cmap, vmin=lo, vmax=top, aspect="auto")
        for i, d in enumerate(directions):
            for j, a in enumerate(arms):
                r = at[d, a]
                mark = ("*" if r[metric]["significant"] else "") + ("o" if r["edit"]["off_data"] else "")
                dark = abs(grid[i, j]) > 0.6 * top if metric != TV else grid[i, j] < 0.5 * top
                ax.text(j, i, mark, ha="center", va="center", fontsize=9, color="white" if dark else "black")
        ax.set_xticks(range(len(arms)), arms, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(directions)), [f"{label} {d}" for d in directions], fontsize=7)
        ax.set_title(HEADS[metric] if metric != TV else "TV of actions", fontsize=9)
        fig.colorbar(im, ax=ax, shrink=0.8)
    corr = summary["correction"]
    fig.suptitle(
        f"intervention sweep, {len(summary['levels'])} paired levels: * significant ({corr['method']}, "
        f"alpha {corr['alpha']}), o held off the data",
        fontsize=9,
        y=1.02,
    )
    return save_tight(fig, path)
