"""Coordinate systems side by side on the atlas's and the sweep's measurements (``proclab analyze compare-bases``).

Run after ``analyze atlas --basis B`` (and, for the causal share, ``analyze sweep --basis B``)
of every system ``B`` compared; reads their ``atlas.json`` and ``sweep.json`` (the statistics are in
:mod:`proclab.interpret.atlas.comparison`) and writes ``ANALYSIS/compare-bases/``: ``bases.json`` (every
number), ``bases.txt`` (the table, also printed) and ``bases.png`` (one panel per measurement).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.atlas.causes import load_sweep
from proclab.interpret.atlas.comparison import against, measure
from proclab.interpret.workspace.figures import save_tight
from proclab.interpret.workspace.folder import Workspace
from proclab.interpret.workspace.systems import SYSTEMS, check_system, file_digest, suffix, system_file
from proclab.io.files import read_json, subplots, write_json, write_text

NAME = "compare-bases"
FORMAT = "proclab-compare-bases"


@dataclass(frozen=True)
class BasesComparison:
    """What :func:`write_comparison` compares (``analyze compare-bases``' options of these names)."""

    basis: tuple[str, ...] = ("ica", "units")  # systems compared, each with its atlas (and sweep)
    reference: str = "ica"  # the system every other is compared with
    threshold: float = 0.3  # |r| at lag 0 from which a tracked gt quantity is a ground-truth correlate
    bootstrap: int = 2000  # resamples of the directions for the intervals of means, medians and differences
    seed: int = 0  # seed of the resamples of directions

    def check(self) -> None:
        for name in self.basis:
            check_system(name)
        if len(set(self.basis)) < 2:
            raise ProclabError(
                f"--basis names {len(set(self.basis))} system; compare two or more (e.g. ica units)"
            )
        if self.reference not in self.basis:
            raise unknown_choice("--reference", self.reference, {b: SYSTEMS[b] for b in self.basis})
        if not 0 <= self.threshold <= 1:
            raise ProclabError(f"--threshold must be in [0, 1], got {self.threshold}")
        if self.bootstrap < 1:
            raise ProclabError(f"--bootstrap must be >= 1, got {self.bootstrap}")


def read_system(ws: Workspace, name: str) -> tuple[dict, dict | None, str]:
    """System ``name``'s atlas (of the folder's current fit), its sweep when one was run on that fit, and why not."""
    path = ws.path / ("atlas" + suffix(name)) / "atlas.json"
    if not path.is_file():
        raise ProclabError(
            f"no atlas of {name} in {str(ws.path)!r}; run `proclab analyze atlas --basis {name}` first"
        )
    atlas = read_json(path, f"the atlas of {name}")
    digest = file_digest(system_file(ws, name))
    if atlas.get("basis_digest", digest) != digest:
        raise ProclabError(
            f"{str(path)!r} describes an earlier fit of {name}; run `proclab analyze atlas --basis {name}` again"
        )
    sweep, note = load_sweep(ws.path / ("sweep" + suffix(name)), system_file(ws, name))
    if sweep is not None and not sweep["claims"]["basis"]:
        return atlas, None, "its sweep held no direction (--directions none)"
    return atlas, sweep, note


def write_comparison(ws: Workspace, settings: BasesComparison, start: float) -> tuple[Path, list[Path], dict]:
    """Compare the systems of ``settings.basis`` in the analysis folder ``ws``, written into
    ``ANALYSIS/compare-bases/`` (the wall time since ``start``, a ``perf_counter`` value, in its JSON); returns
    the folder, its files and the comparison (``bases.json``; :func:`table` prints it)."""
    systems, notes, described = {}, {}, set()
    for name in dict.fromkeys(settings.basis):
        atlas, sweep, notes[name] = read_system(ws, name)
        described.add((atlas["data"], atlas["episodes"]))
        systems[name] = measure(atlas, sweep, settings.threshold, settings.bootstrap, settings.seed)
    if len(described) > 1:
        raise ProclabError(
            "the atlases describe different episodes ("
            + "; ".join(f"{d}: {e}" for d, e in sorted(described))
            + "); build them with the same --data and --episodes"
        )
    reference = systems[settings.reference]
    doc = {
        "format": FORMAT,
        "version": 1,
        "reference": settings.reference,
        "threshold": settings.threshold,
        "bootstrap": settings.bootstrap,
        "data": next(iter(described))[0],
        "episodes": next(iter(described))[1],
        "systems": systems,
        "sweep_notes": notes,
        "against_reference": {
            n: against(s, reference, settings.bootstrap, settings.seed)
            for n, s in systems.items()
            if n != settings.reference
        },
    }
    folder = ws.command_dir(NAME)
    text = table(doc)
    files = [
        write_text(folder / "bases.txt", text, "comparison table"),
        figure(doc, folder / "bases.png"),
    ]
    doc["seconds"] = round(time.perf_counter() - start, 3)
    files.append(write_json(folder / "bases.json", doc, "comparison JSON"))
    return folder, files, doc


def _ci(v: dict, fmt: str = "{:.2f}") -> str:
    lo, hi = v["ci95"]
    return f"{fmt.format(v.get('value', v.get('difference')))} [{fmt.format(lo)}, {fmt.format(hi)}]"


def _share(s: dict | None) -> str:
    if s is None:
        return "not swept"
    lo, hi = s["ci95"]
    return f"{s['count']}/{s['of']} ({100 * s['share']:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}])"


def _diff(d: dict | None) -> str:
    if d is None or d["difference"] is None:
        return "-"
    lo, hi = d["ci95"]
    return f"{100 * d['difference']:+.0f} points [{100 * lo:+.0f}, {100 * hi:+.0f}], Fisher p {d['p_fisher']:.3g}"


def table(doc: dict) -> str:
    """The comparison as printed: one row per system, then each system against the reference."""
    head = ["system", "directions", "strongest |r| mean", "median", "strongest gt |r| mean", "median",
            f"gt |r| >= {doc['threshold']:g}", "matters when edited", "changes return"]  # fmt: skip
    rows = [head]
    for name, s in doc["systems"].items():
        r, g = s["strongest_r"], s["strongest_gt_r"]
        rows.append([name, str(s["directions"]), _ci(r["mean"]), _ci(r["median"]), _ci(g["mean"]),
                     _ci(g["median"]), _share(s["ground_truth"]), _share(s["sweep"]),
                     _share(s["sweep"] and s["sweep"]["changes_return"])])  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [
        f"coordinate systems on the atlas's {doc['episodes']} episodes: strongest |r| at lag 0 with any tracked "
        "quantity (and with ground truth alone) per direction, intervals over directions; 'matters': the "
        "sweep's claim significant within the direction; 'changes return': return's tests alone; Wilson "
        "intervals",
        *("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows),
        f"against {doc['reference']} (unpaired: directions of different systems are different objects):",
    ]
    for name, d in doc["against_reference"].items():
        r, g = d["strongest_r"], d["strongest_gt_r"]
        lines.append(
            f"  {name}: strongest |r| mean {_ci(r['mean'], '{:+.2f}')}, median {_ci(r['median'], '{:+.2f}')}; "
            f"gt |r| mean {_ci(g['mean'], '{:+.2f}')}; ground truth share {_diff(d['ground_truth'])}; "
            f"matters {_diff(d['sweep'])}; changes return {_diff(d['sweep_return'])}"
        )
    return "\n".join(lines) + "\n"


def figure(doc: dict, path: Path) -> Path:
    """Four panels: each direction's strongest |r| (points) with the mean's interval, the ground-truth
    share, the share that matters and the share that changes return (bars with Wilson intervals)."""
    names = list(doc["systems"])
    fig, axes = subplots(1, 4, figsize=(8 + 3.2 * len(names), 3.6))
    rng = np.random.default_rng(0)
    for x, name in enumerate(names):
        s = doc["systems"][name]
        best = np.asarray(s["per_direction"]["strongest_r"])
        axes[0].scatter(x + rng.uniform(-0.2, 0.2, len(best)), best, s=8, alpha=0.5)
        mean = s["strongest_r"]["mean"]
        axes[0].errorbar(x, mean["value"], yerr=_yerr(mean["value"], mean["ci95"]), color="black", capsize=4)
        swept = s["sweep"] and s["sweep"]["changes_return"]
        for ax, share in ((axes[1], s["ground_truth"]), (axes[2], s["sweep"]), (axes[3], swept)):
            if share is None:
                ax.text(x, 0.05, "not swept", ha="center", fontsize=8)
                continue
            ax.bar(x, share["share"], color="tab:blue", alpha=0.6)
            ax.errorbar(
                x, share["share"], yerr=_yerr(share["share"], share["ci95"]), color="black", capsize=4
            )
    titles = [
        "strongest |r| per direction (mean, 95 % CI)",
        f"share with a gt |r| >= {doc['threshold']:g}",
        "share that matters when edited",
        "share whose edit changes return",
    ]
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xticks(range(len(names)), names)
        ax.set_title(title, fontsize=9)
        ax.set_ylim(0, 1)
        ax.set_xlim(-0.6, len(names) - 0.4)
    return save_tight(fig, path)


def _yerr(value: float, ci) -> np.ndarray:
    return np.array([[max(value - ci[0], 0.0)], [max(ci[1] - value, 0.0)]])
