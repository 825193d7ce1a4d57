"""The sweep's table (text and CSV, sorted by effect size) and its figure (changes per direction and arm)."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import numpy as np

from proclab.interpret.sweep.stats import TV
from proclab.interpret.workspace.figures import save_tight
from proclab.io.files import subplots

COLUMNS = ("return", "level_complete", "length", TV)
HEADS = {"return": "d return", "level_complete": "d complete", "length": "d length", TV: "TV actions"}


def _estimate(metric: dict) -> float:
    return metric["value"] if "value" in metric else metric["change"]


def _cell(metric: dict, testable: bool = True) -> str:
    """``-2.31 [-3.10, -1.52]*``: estimate, corrected CI, a star when significant after correction; the
    estimate alone when the sweep played too few levels to test anything."""
    if not testable:
        return f"{_estimate(metric):+.3g}"
    lo, hi = metric["ci_corrected"]
    star = "*" if metric["significant"] else " "
    return f"{_estimate(metric):+.3g} [{lo:+.3g}, {hi:+.3g}]{star}"


def _landing(result: dict) -> str:
    """``2.1x, 34 % far``: the edited states' median distance to the recorded ones against the baseline's,
    and their share beyond the baseline's 99th percentile (``-`` when not measured)."""
    land = result.get("landing")
    if not land or "median_ratio" not in land:
        return "-"
    return f"{land['median_ratio']:.2g}x, {100 * land['beyond_real_p99']:.0f} % far"


def _testable(summary: dict) -> bool:
    return summary.get("power", {}).get("testable", True)


def table_rows(summary: dict, label: str) -> list[list[str]]:
    """One row per (direction, arm), in the summary's order (sorted by effect size)."""
    rows = []
    for rank, r in enumerate((r for r in summary["results"] if not r.get("random")), start=1):
        e = r["edit"]
        place = f"{e['percentile']:.1f}" + (" off" if e["off_data"] else "")
        rows.append(
            [str(rank), f"{label} {r['direction']}", r["arm"], f"{e['value']:.3g}", place]
            + [_cell(r[c], _testable(summary)) for c in COLUMNS]
            + [_landing(r)]
        )
    return rows


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def swaps_text(summary: dict, label: str) -> list[str]:
    """The swaps (``--swaps``): per pair the changes against the baseline, and the deaths by cause when
    measured (rates; changes with corrected CIs over the swaps, ``*`` significant)."""
    swaps = summary.get("swaps") or []
    if not swaps:
        return []
    testable = _testable(summary)
    causes = (summary.get("deaths") or {}).get("causes", [])
    head = ["swap", "off"] + [HEADS[c] for c in COLUMNS] + [f"d deaths {c}" for c in causes]
    rows = [head]
    for r in swaps:
        i, j = r["swap"]
        off = "/".join(f"{100 * x:.0f} %" for x in r["edit"]["off_data_share"])
        deaths = [_cell(r["deaths"][c], testable) for c in causes]
        name = f"{'random ' if r.get('random') else ''}{label} {i} <-> {label} {j}"
        rows.append([name, off, *(_cell(r[c], testable) for c in COLUMNS), *deaths])
    chosen = sum(not r.get("random") for r in swaps)
    lines = [
        "",
        f"swaps (coordinates exchanged at every step; corrected over the {chosen} chosen swaps, random pairs "
        "apart; 'off': the share of each one's recorded values outside the other's recorded 0.5-99.5 % range):",
    ]
    lines += ["  " + line for line in _aligned(rows)]
    for pick in summary.get("swaps_picked", []):
        lo, hi = pick["ci0"]
        lines.append(
            f"  {label} {pick['direction']} picked for {pick['kind']}: it tracks {pick['quantity']} most strongly "
            f"(r = {pick['r0']:+.2f} [{lo:+.2f}, {hi:+.2f}], atlas of this basis)"
        )
    return lines + control_text(summary, label)


def control_text(summary: dict, label: str) -> list[str]:
    """The swaps' control (``--random-swaps``): per chosen swap and metric, its change, its rank among the
    random pairs' and the empirical p-values (proclab.interpret.sweep.random_swaps)."""
    lines = []
    for c in summary.get("swap_control") or []:
        i, j = c["swap"]
        lines += ["", f"{label} {i} <-> {label} {j} against {c['random_pairs']} random pairs of the basis:"]
        for metric, r in c["metrics"].items():
            lo, hi = r["beyond_random_ci95"]
            lines.append(
                f"  {metric}: change {r['change']:+.4f}, rank {r['rank']} of {r['of']} "
                f"(95 % CI {r['rank_ci95'][0]}-{r['rank_ci95'][1]}), random pairs {r['random_range'][0]:+.4f} "
                f"to {r['random_range'][1]:+.4f}, beyond their mean {r['beyond_random']:+.4f} [{lo:+.4f}, {hi:+.4f}]; "
                f"p upper {r['p_upper']:.3f}, lower {r['p_lower']:.3f}, two-sided Holm {r['p_adjusted']:.3f}"
            )
    return lines


def deaths_text(summary: dict) -> list[str]:
    """The baseline's deaths by cause (each variant's changes are in the JSON and the swaps' table)."""
    deaths = summary.get("deaths")
    if not deaths:
        return []
    rates = ", ".join(f"{c} {100 * v:.1f} %" for c, v in deaths["baseline"].items())
    return ["", f"baseline deaths per level ({deaths['rule']}): {rates}"]


def table_text(summary: dict, label: str) -> str:
    """The table as printed: aligned columns, a header saying what the cells hold."""
    head = ["#", "direction", "arm", "held at", "percentile"] + [HEADS[c] for c in COLUMNS] + ["lands"]
    lines = _aligned([head, *table_rows(summary, label)])
    extra = [*swaps_text(summary, label), *deaths_text(summary)]
    if not summary["results"]:
        held = f"{len(summary['levels'])} paired levels; no direction held (--directions none)"
        return "\n".join([held, *extra]) + "\n"
    corr = summary["correction"]
    if not _testable(summary):
        power = summary["power"]
        note = (
            f"changes against the baseline on {len(summary['levels'])} paired levels, estimates only: the "
            f"smallest p-value {len(summary['levels'])} paired levels allow is {power['smallest_p']:.3g}, so "
            f"nothing can be significant at {corr['alpha']} (a direction's claim needs "
            f"{power['levels_for_claims']} levels or more); sorted by |change| in {summary['sort']}; 'off': "
            "the held value lies outside the recorded 0.5-99.5 % range; 'lands': see docs/analyses.md"
        )
        return "\n".join([note, *lines, *extra]) + "\n"
    note = (
        f"changes against the baseline on {len(summary['levels'])} paired levels, with intervals corrected "
        f"by {corr['name']} over {corr['tests_per_family']} directions per arm and metric "
        f"(* significant at {corr['alpha']}); sorted by |change| in {summary['sort']}; "
        f"'off': the held value lies outside the recorded 0.5-99.5 % range; 'lands': the edited states' median "
        "distance to the nearest recorded state against the unedited agent's, and their share beyond its 99th "
        "percentile, in the full state space"
    )
    return "\n".join([note, *lines, *claims_text(summary, label), *extra]) + "\n"


def _share(s: dict) -> str:
    lo, hi = s["ci95"]
    return f"{s['count']} of {s['of']} ({100 * s['share']:.0f} %, 95 % CI {100 * lo:.0f}-{100 * hi:.0f} %)"


def claims_text(summary: dict, label: str) -> list[str]:
    """Per direction the claim's verdict (effect / no effect within the margin / not shown either way) and
    its p-values, then the shares of directions that matter and that change return, beside the shares of
    random directions."""
    if "claims" not in summary or not summary["claims"]["basis"]:
        return []  # no direction was held (--directions none): no claim
    c = summary["claims"]
    lines = ["", f"claims per direction ({c['rule']}):"]
    for r in c["basis"]:
        p = "-" if r["p_adjusted"] is None else f"p {r['p']:.3g}, adjusted {r['p_adjusted']:.3g}"
        carried = ", ".join(f"{x['arm']} {x['metric']}" for x in r["carried_by"][:3])
        lines.append(
            f"  {label} {r['direction']}: {r['verdict']} ({p})" + (f"; by {carried}" if carried else "")
        )
    lines += _against_random(c["matter"], label, "matter")
    lines.append(f"('matter': {c['matter']['rule']})")
    if "return" in c.get("changes", {}):
        lines += _against_random(c["changes"]["return"], label, "change return")
        lines.append(f"('change return': {c['changes']['return']['rule']})")
    return lines


def _against_random(shares: dict, label: str, what: str) -> list[str]:
    """The basis's share that ``what`` and, where random directions were swept, theirs and the difference."""
    lines = [f"{label}s that {what}: {_share(shares['basis'])}"]
    if "random" in shares:
        diff = shares["basis_minus_random"]
        lines.append(
            f"random directions that {what}: {_share(shares['random'])}; difference "
            f"{100 * diff['difference']:+.0f} points, 95 % CI {100 * diff['ci95'][0]:+.0f} to "
            f"{100 * diff['ci95'][1]:+.0f}, Fisher p {diff['p_fisher']:.3g}"
        )
    return lines


def table_csv(summary: dict, label: str) -> str:
    """Machine-readable: per (direction, arm), then per swap, and metric: estimate, corrected CI, adjusted p,
    significance (and the change in each death rate when measured)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    head = ["rank", "direction", "arm", "held_value", "percentile", "off_data"]
    for c in COLUMNS:
        head += [c, f"{c}_ci_lo", f"{c}_ci_hi", f"{c}_p_adjusted", f"{c}_significant"]
    causes = (summary.get("deaths") or {}).get("causes", [])
    for c in causes:
        head += [f"deaths_{c}", f"deaths_{c}_ci_lo", f"deaths_{c}_ci_hi", f"deaths_{c}_p_adjusted"]
    w.writerow([*head, "landing_median_ratio", "landing_beyond_real_p99"])
    rows = [(rank, r) for rank, r in enumerate(summary["results"], start=1)]
    rows += [("", r) for r in summary.get("swaps") or []]
    for rank, r in rows:
        e = r["edit"]
        if "swap" in r:
            row = [rank, f"{label} {r['swap'][0]} <-> {label} {r['swap'][1]}", "swap", "", "", e["off_data"]]
        else:
            name = "random" if r.get("random") else label
            row = [rank, f"{name} {r['direction']}", r["arm"], e["value"], e["percentile"], e["off_data"]]
        for c in COLUMNS:
            m = r[c]
            row += [_estimate(m), *m["ci_corrected"], m["p_adjusted"], m["significant"]]
        for c in causes:
            m = r["deaths"][c]
            row += [m["change"], *m["ci_corrected"], m["p_adjusted"]]
        land = r.get("landing") or {}
        w.writerow([*row, land.get("median_ratio", ""), land.get("beyond_real_p99", "")])
    return buf.getvalue()


def write_text_atomic(path: Path, text: str) -> Path:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def figure(summary: dict, label: str, path: Path) -> Path:
    """One heat map per metric: directions (rows) by arms (columns), the change (TV: the distance), and
    below them one row per swap in a ``swap`` column; ``*`` significant after correction, ``o`` held off
    the data."""
    arms = list(summary["arms"]) if summary["results"] else []  # --directions none: the swaps alone
    at = {(f"{label} {r['direction']}", r["arm"]): r for r in summary["results"] if not r.get("random")}
    rows = [f"{label} {d}" for d in summary["directions"]]
    swaps = summary.get("swaps") or []
    for r in swaps:
        rows.append(f"{label} {r['swap'][0]} <-> {r['swap'][1]}")
        at[rows[-1], "swap"] = r
    arms += ["swap"] if swaps else []
    fig, axes = subplots(
        1, len(COLUMNS), figsize=(1.2 + len(COLUMNS) * (0.55 * len(arms) + 1.4), 1.5 + 0.3 * len(rows))
    )
    for ax, metric in zip(axes, COLUMNS, strict=True):
        grid = np.array(
            [[_estimate(at[d, a][metric]) if (d, a) in at else np.nan for a in arms] for d in rows]
        )
        top = float(np.nanmax(np.abs(grid))) or 1.0
        cmap, lo = ("viridis", 0.0) if metric == TV else ("RdBu_r", -top)
        im = ax.imshow(grid, cmap=cmap, vmin=lo, vmax=top, aspect="auto")
        for i, d in enumerate(rows):
            for j, a in enumerate(arms):
                if (d, a) not in at:
                    continue
                r = at[d, a]
                mark = ("*" if r[metric]["significant"] else "") + ("o" if r["edit"]["off_data"] else "")
                dark = abs(grid[i, j]) > 0.6 * top if metric != TV else grid[i, j] < 0.5 * top
                ax.text(j, i, mark, ha="center", va="center", fontsize=9, color="white" if dark else "black")
        ax.set_xticks(range(len(arms)), arms, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(rows)), rows, fontsize=7)
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
