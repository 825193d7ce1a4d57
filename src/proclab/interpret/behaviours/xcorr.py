"""Per behaviour, how ICs follow each other in time, and what drives what (``proclab analyze xcorr``).

Reads the folder's behaviours (``analyze behaviours``), the samples' IC loadings (the basis of
``analyze hidden``) and, for cross-causation, a saliency run with targets ``ic:0-(k-1)`` at the
target step ``k*`` with and without env grads (``--saliency NAME``; run here if it is missing).
Definitions and orientation: :mod:`proclab.interpret.behaviours.dynamics`.

Outputs in ``ANALYSIS/xcorr/``: ``xcorr.npz`` (``X`` per behaviour, the last row over all
samples; the extrema-conditioned ``top``/``bottom`` laid out the same way; the Ward-seriated IC ``order``; the IC
directions' ``cosine`` similarity), ``xcaus.npz`` (``J`` per behaviour and setting), heatmap
PNGs per behaviour (rows earlier IC, columns later IC, in seriated order) and ``summary.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from proclab.errors import ProclabError
from proclab.interpret.behaviours.dynamics import (
    cosine,
    extrema_xcorr,
    group_mean,
    per_sample_jacobians,
    per_sample_xcorr,
    seriation,
)
from proclab.interpret.behaviours.grouping import NAME as BEHAVIOURS
from proclab.interpret.behaviours.grouping import SampleSet, open_samples, source_of
from proclab.interpret.workspace.folder import Workspace
from proclab.io.files import load_npz, save_figure, save_npz, subplots
from proclab.io.run_dirs import write_json_atomic
from proclab.run.runtime import Runtime
from proclab.store import EpisodeStore

NAME = "xcorr"
SETTINGS = {True: "env_grads", False: "no_env_grads"}


@dataclass(frozen=True)
class DynamicsSettings:
    """What xcorr and consistency read (their options of these names)."""

    samples: Path | None = None  # sample store (None: the folder's)
    saliency: str = "saliency-ic"  # saliency run (subfolder) with targets ic:0-(k-1), env grads on and off
    max_lag: int = 10  # largest lag of the cross-correlation


@dataclass(frozen=True)
class XcorrSettings:
    """What :func:`write_xcorr` writes (``analyze xcorr``'s options of these names)."""

    max_lag: int = 10  # largest lag of the cross-correlation
    extrema: float = 0.02  # share of the extrema-conditioned cross-correlation (top and bottom of later IC)
    plots: bool = True  # write the heatmap PNGs


@dataclass
class Dynamics:
    """Everything per sample that the xcorr and consistency statistics are group means of."""

    ids: np.ndarray
    labels: np.ndarray
    groups: int
    ics: np.ndarray
    xcorr_per_sample: np.ndarray
    order: np.ndarray
    step: int = 0
    max_lag: int = 0
    jacobians: dict[str, np.ndarray] = field(default_factory=dict)
    """Setting -> ``(m, k* + 1, k, k)``; ``rows[setting]`` are their samples' positions in ``ids``."""
    rows: dict[str, np.ndarray] = field(default_factory=dict)


def format_ids(ids: np.ndarray) -> str:
    """Sample ids as the ``--ids`` syntax (contiguous runs as ranges)."""
    parts, start = [], 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[i - 1] + 1:
            parts.append(f"{ids[start]}:{ids[i - 1] + 1}")
            start = i
    return ",".join(parts)


def load_dynamics(
    ws: Workspace,
    settings: DynamicsSettings,
    runtime: Runtime,
    ic_saliency: Callable[[Path, np.ndarray, int], EpisodeStore] | None = None,
) -> Dynamics:
    """Behaviour labels, IC loadings, per-sample xcorr and, given ``ic_saliency`` (the saliency store of IC
    targets for the sample store, the sample ids and the number of ICs), per-sample Jacobians; a hook point's
    activations are replayed on ``runtime``."""
    store, samples = open_samples(settings.samples, ws)
    labels_file = ws.path / BEHAVIOURS / "labels.npz"
    if not labels_file.is_file():
        raise ProclabError(
            f"analysis folder {str(ws.path)!r} has no behaviours; run `proclab analyze behaviours` first"
        )
    f = load_npz(labels_file, "behaviour labels")
    try:
        ids, labels, groups = f["ids"], f["labels"], int(f["clusters"])
    except KeyError as err:
        raise ProclabError(f"behaviour labels {str(labels_file)!r} are corrupt (no {err})") from None
    basis = ws.basis()
    s = SampleSet.read(store, ids.tolist(), source_of(ws, store), ws.agent_checkpoint(), runtime)
    ics = basis.to_ics(s.state.reshape(-1, s.state.shape[-1]).astype(np.float64)).reshape(
        *s.state.shape[:2], -1
    )
    d = Dynamics(ids, labels, groups, ics, np.zeros(0), np.zeros(0))
    if ic_saliency is not None:
        sal = ic_saliency(samples, ids, basis.n_ics)
        J, sample, env_grads, d.step = per_sample_jacobians(sal, basis.n_ics)
        position = {int(i): p for p, i in enumerate(ids)}
        for flag, setting in SETTINGS.items():
            pick = np.flatnonzero((env_grads == flag) & np.isin(sample, ids))
            if len(pick):
                d.jacobians[setting] = J[pick]
                d.rows[setting] = np.array([position[int(i)] for i in sample[pick]])
        if not d.jacobians:
            raise ProclabError(f"saliency run {settings.saliency!r} covers none of the behaviours' samples")
    d.max_lag = min(max(settings.max_lag, d.step), ics.shape[1] - 1)  # lag T - 1 is the last with a pair
    d.xcorr_per_sample = per_sample_xcorr(ics, d.max_lag)
    d.order = seriation(d.xcorr_per_sample.mean(0)[0])
    return d


def write_xcorr(ws: Workspace, d: Dynamics, settings: XcorrSettings) -> tuple[Path, list[Path]]:
    """The cross-correlations and cross-causation of ``d`` written into ``ANALYSIS/xcorr/`` (see the module
    docstring); returns the folder and its files."""
    out = ws.command_dir(NAME)
    lags = slice(0, min(settings.max_lag, d.max_lag) + 1)
    X = np.concatenate(
        [group_mean(d.xcorr_per_sample, d.labels, d.groups), d.xcorr_per_sample.mean(0)[None]]
    )[:, lags]
    top, bottom = extrema_xcorr(d.ics, X.shape[1] - 1, settings.extrema, d.labels, d.groups)
    directions = ws.basis().directions("ica")
    save_npz(
        out / "xcorr.npz",
        "cross-correlations",
        X=X,
        top=top,
        bottom=bottom,
        order=d.order,
        cosine=cosine(directions),
        sizes=np.bincount(d.labels, minlength=d.groups),
    )
    outputs = [out / "xcorr.npz", out / "summary.json"]
    summary = {
        "behaviours": d.groups,
        "samples": len(d.ids),
        "max_lag": X.shape[1] - 1,
        "order": d.order.tolist(),
        "orientation": "X[l][i, j]: IC i at step t (rows), IC j at step t + l (columns)",
        "mean_abs_xcorr_per_lag": np.abs(X[-1]).mean((1, 2)).round(6).tolist(),
    }
    if d.jacobians:
        J = {
            s: np.concatenate([group_mean(j, d.labels[d.rows[s]], d.groups), j.mean(0)[None]])
            for s, j in d.jacobians.items()
        }
        save_npz(out / "xcaus.npz", "cross-causal Jacobians", step=d.step, **J)
        outputs.append(out / "xcaus.npz")
        summary["xcaus"] = {
            "target_step": d.step,
            "settings": list(J),
            "mean_abs_jacobian_per_lag": {
                s: np.abs(j[-1]).mean((1, 2)).round(6).tolist() for s, j in J.items()
            },
        }
    if settings.plots:
        outputs += _heatmaps(out, X, d.order, "X", 0.8)
        for s, j in (J if d.jacobians else {}).items():
            outputs += _heatmaps(out, j, d.order, f"J_{s}", 0.25)
    write_json_atomic(out / "summary.json", summary)
    return out, outputs


def _heatmaps(out: Path, M: np.ndarray, order: np.ndarray, name: str, clim: float) -> list[Path]:
    """One PNG per behaviour (the last: all samples), one panel per lag, seismic, seriated IC order."""
    paths = []
    for g, mats in enumerate(M):
        if np.isnan(mats).all():
            continue
        cols = min(6, len(mats))
        rows = -(-len(mats) // cols)
        fig, axes = subplots(rows, cols, figsize=(2.6 * cols, 2.6 * rows), squeeze=False)
        for ax in axes.flat:
            ax.axis("off")
        for lag, mat in enumerate(mats):
            ax = axes.flat[lag]
            ax.axis("on")
            ax.imshow(mat[np.ix_(order, order)], cmap="seismic", vmin=-clim, vmax=clim)
            ax.set_title(f"{name} lag {lag}", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
        tag = "all" if g == len(M) - 1 else f"behaviour_{g:02d}"
        fig.suptitle(f"{name}, {tag} (rows: earlier IC, columns: later IC)", fontsize=9)
        paths.append(save_figure(fig, out / f"{name}_{tag}.png", dpi=80))
    return paths
