"""Do the IC dynamics' gradients and correlations tell the same story? (``proclab analyze consistency``)

Per behaviour and lag ``l >= 1``, the **sign agreement** of the cross-causation ``J[l]`` and the
cross-correlation ``X[l]`` (same orientation, :mod:`proclab.interpret.behaviours.dynamics`): the share of
IC pairs ``(i, j)`` with ``(J >= 0) == (X >= 0)`` (the seed's test), over all pairs and over the
*strong* pairs, where both ``|J|`` and ``|X|`` are above their 75th percentile in that matrix;
with and without env grads. Is it more than chance? The **null** shuffles the behaviour labels
over the samples 1000 times (groups keep their sizes), recomputes each group's ``J`` and ``X``
from the members' per-sample contributions, and reports the null's mean and the p-value
``(1 + #{null >= observed}) / (1 + permutations)``. Signs and percentile sets do not change when
a matrix is scaled by a positive number, so the permutations only need group *sums*.

Outputs in ``ANALYSIS/consistency/``: ``summary.json`` (for the report and the panel) and one
triptych PNG per behaviour (rows: lags; columns: ``J``, ``X``, agreement mask).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from proclab.interpret.behaviours.xcorr import Dynamics
from proclab.interpret.workspace.folder import Workspace
from proclab.io.files import save_figure, subplots
from proclab.io.progress import phases
from proclab.io.run_dirs import write_json_atomic
from proclab.stats.permutation import permutation_p

NAME = "consistency"


@dataclass(frozen=True)
class ConsistencySettings:
    """What :func:`write_consistency` tests and draws (``analyze consistency``'s options of these names)."""

    permutations: int = 1000  # label permutations of the null
    quantile: float = 0.75  # strong pairs: both |J| and |X| above this quantile of their matrix
    plots: bool = True  # write the triptych PNGs
    seed: int = 0  # seed of the label permutations of the null


def sign_agreement(J: np.ndarray, X: np.ndarray, quantile: float = 0.75) -> tuple[np.ndarray, np.ndarray]:
    """``(..., k, k)`` matrices -> (share of pairs with equal signs, the same over strong pairs) ``(...)``."""
    same = (J >= 0) == (X >= 0)
    flat = same.reshape(*same.shape[:-2], -1)
    aj, ax = np.abs(J).reshape(flat.shape), np.abs(X).reshape(flat.shape)
    strong = (aj > np.quantile(aj, quantile, axis=-1, keepdims=True)) & (
        ax > np.quantile(ax, quantile, axis=-1, keepdims=True)
    )
    with np.errstate(invalid="ignore"):
        strong_share = np.where(strong.any(-1), (flat & strong).sum(-1) / strong.sum(-1), np.nan)
    return flat.mean(-1), strong_share


def group_sums(per_sample: np.ndarray, labels: np.ndarray, groups: int) -> np.ndarray:
    """``(n, F)`` rows summed per group -> ``(groups, F)`` (NaN for an empty group)."""
    order = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=groups)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    out = np.full((groups, per_sample.shape[1]), np.nan)
    live = counts > 0
    out[live] = np.add.reduceat(per_sample[order], starts[live], axis=0)
    return out


def permutation_test(
    J: np.ndarray,
    X: np.ndarray,
    labels: np.ndarray,
    groups: int,
    permutations: int,
    seed: int,
    quantile: float = 0.75,
) -> dict[str, np.ndarray]:
    """Per-sample ``J``, ``X`` contributions ``(n, L, k, k)`` and labels -> observed agreement, null mean
    and p-value per group and lag, for all pairs and strong pairs (arrays ``(groups, L)``)."""
    n, L, k, _ = J.shape
    data = np.concatenate([J.reshape(n, -1), X.reshape(n, -1)], 1)

    def agreement(lab: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sums = group_sums(data, lab, groups)
        Jg, Xg = sums[:, : L * k * k].reshape(groups, L, k, k), sums[:, L * k * k :].reshape(groups, L, k, k)
        a, s = sign_agreement(Jg, Xg, quantile)
        empty = np.isnan(sums[:, 0])
        a[empty] = np.nan
        return a, s

    observed = agreement(labels)
    rng = np.random.default_rng(seed)
    null = [np.empty((permutations, groups, L)) for _ in range(2)]
    for p in range(permutations):
        a, s = agreement(rng.permutation(labels))
        null[0][p], null[1][p] = a, s
    out = {}
    for name, obs, nul in (("all", observed[0], null[0]), ("strong", observed[1], null[1])):
        out[name] = obs
        with warnings.catch_warnings():  # an empty group's null is all NaN: its mean is NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            out[f"{name}_null_mean"] = np.nanmean(nul, 0) if permutations else np.full_like(obs, np.nan)
        out[f"{name}_p"] = np.where(np.isnan(obs), np.nan, permutation_p(obs, nul))
    return out


def _record(summary: dict, setting: str, res: dict[str, np.ndarray]) -> None:
    with warnings.catch_warnings():  # an empty behaviour's row is all NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        means = {k: np.nanmean(v, 0) for k, v in res.items()}
    summary["settings"][setting] = {k: as_json(v) for k, v in res.items()}
    summary["settings"][setting]["mean_over_behaviours"] = {k: as_json(v) for k, v in means.items()}


def as_json(a: np.ndarray) -> list:
    """Nested lists of 6-digit floats, None where NaN (JSON has no NaN)."""
    return np.where(np.isnan(a), None, np.round(a, 6).astype(object)).tolist()


def write_consistency(ws: Workspace, d: Dynamics, settings: ConsistencySettings) -> tuple[Path, list[Path]]:
    """The sign agreement of ``d``'s Jacobians and cross-correlations against its permutation null, written into
    ``ANALYSIS/consistency/`` (see the module docstring); returns the folder and its files."""
    out = ws.command_dir(NAME)
    lags = slice(1, d.step + 1)
    summary: dict = {
        "target_step": d.step,
        "lags": list(range(1, d.step + 1)),
        "permutations": settings.permutations,
        "quantile": settings.quantile,
        "behaviours": d.groups,
        "settings": {},
    }
    outputs = [out / "summary.json"]
    with phases(len(d.jacobians), "consistency") as ph:
        for setting, J in d.jacobians.items():
            with ph.phase(f"{setting}: {settings.permutations} permutations"):
                X = d.xcorr_per_sample[d.rows[setting]][:, lags]
                res = permutation_test(
                    J[:, 1:],
                    X,
                    d.labels[d.rows[setting]],
                    d.groups,
                    settings.permutations,
                    settings.seed,
                    settings.quantile,
                )
                _record(summary, setting, res)
                if settings.plots:
                    outputs += _triptychs(out, setting, d, J[:, 1:], X)
    write_json_atomic(out / "summary.json", summary)
    return out, outputs


def _triptychs(out: Path, setting: str, d, J: np.ndarray, X: np.ndarray) -> list[Path]:
    paths = []
    rows_of = d.labels[d.rows[setting]]
    for g in range(d.groups):
        m = rows_of == g
        if not m.any():
            continue
        Jg, Xg = J[m].mean(0), X[m].mean(0)
        fig, axes = subplots(len(Jg), 3, figsize=(9, 3 * len(Jg)), squeeze=False)
        for lag, (a, b) in enumerate(zip(Jg, Xg, strict=True), start=1):
            same = ((a >= 0) == (b >= 0)).astype(float)
            for ax, mat, clim, title in (
                (axes[lag - 1, 0], a, 0.25, f"J lag {lag}"),
                (axes[lag - 1, 1], b, 0.8, f"X lag {lag}"),
                (axes[lag - 1, 2], same * 2 - 1, 1, "same sign"),
            ):
                ax.imshow(mat[np.ix_(d.order, d.order)], cmap="seismic", vmin=-clim, vmax=clim)
                ax.set_title(title, fontsize=9)
                ax.set_xlabel("IC later")
                ax.set_ylabel("IC earlier")
                ax.set_xticks(range(len(d.order)), d.order, fontsize=5)
                ax.set_yticks(range(len(d.order)), d.order, fontsize=5)
        fig.suptitle(f"behaviour {g} ({int(m.sum())} samples), {setting}")
        fig.tight_layout()
        paths.append(save_figure(fig, out / f"triptych_{setting}_behaviour_{g:02d}.png", dpi=80))
    return paths
