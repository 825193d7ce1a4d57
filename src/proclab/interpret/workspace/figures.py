"""The analyses' figures (matplotlib, without pyplot): coloured scatter grids, curves, trajectories, histograms."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from proclab.io.files import save_figure, subplots


def _save(fig, path: Path) -> Path:
    """Fixed margins instead of tight_layout, which measures every tick label (seconds per grid)."""
    height = fig.get_figheight()  # margins in inches: room for the title and the axis labels
    fig.subplots_adjust(
        left=0.06, right=0.97, bottom=0.45 / height, top=1 - 0.8 / height, wspace=0.3, hspace=0.45
    )
    save_figure(fig, path, dpi=90)
    fig.clf()
    return path


def save_tight(fig, path: Path) -> Path:
    """Margins fitted to the labels (bbox_inches="tight"): for small figures with long tick labels."""
    return save_figure(fig, path, dpi=90, bbox_inches="tight")


@dataclass(frozen=True)
class Colouring:
    """One panel of a scatter grid: values per point, categorical (with names) or continuous."""

    title: str
    values: np.ndarray
    names: Sequence[str] | None = None  # categorical when given: values index into names

    @property
    def categorical(self) -> bool:
        return self.names is not None


def scatter_grid(
    xy: np.ndarray, panels: list[Colouring], path: Path, title: str, axes: tuple[str, str]
) -> Path:
    """One panel per colouring of the same 2-D points (dreamed states have their own figure,
    :func:`overlays`, so that they hide none of the colourings), written to ``path``."""
    return _save(scatter_figure(xy, panels, title, axes), path)


def scatter_figure(xy: np.ndarray, panels: list[Colouring], title: str, axes: tuple[str, str]):
    """The figure of :func:`scatter_grid` (a result's ``plot()`` shows it without writing it)."""
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, grid = subplots(rows, cols, figsize=(5.2 * cols, 4.4 * rows), squeeze=False)
    for ax, panel in zip(grid.flat, panels, strict=False):
        scatter_panel(ax, xy, panel, axes)
    for ax in list(grid.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(title)
    return fig


def scatter_panel(ax, xy: np.ndarray, panel: Colouring, axes: tuple[str, str]) -> None:
    """The points ``xy`` on ``ax``, coloured by ``panel`` (a legend for categories, a colour bar else)."""
    import matplotlib  # lazy: slow to import; loaded already by the figure being drawn

    size = max(0.5, min(6.0, 3000 / max(1, len(xy))))
    if panel.categorical:
        present = np.unique(panel.values)
        cmap = matplotlib.colormaps["tab20"].resampled(max(len(present), 1))
        for j, v in enumerate(present):
            sel = panel.values == v
            name = panel.names[int(v)] if int(v) < len(panel.names) else str(v)
            ax.scatter(
                xy[sel, 0], xy[sel, 1], s=size, color=cmap(j), label=name, rasterized=True, linewidths=0
            )
        if len(present) <= 20:
            ax.legend(
                fontsize=6, markerscale=max(1.0, 8 / size), loc="best", ncol=2 if len(present) > 8 else 1
            )
    else:
        order = np.argsort(panel.values, kind="stable")  # high values on top
        sc = ax.scatter(
            xy[order, 0],
            xy[order, 1],
            c=panel.values[order],
            s=size,
            cmap="viridis",
            rasterized=True,
            linewidths=0,
        )
        ax.figure.colorbar(sc, ax=ax, fraction=0.046)
    ax.set_title(panel.title, fontsize=10)
    ax.set_xlabel(axes[0], fontsize=8)
    ax.set_ylabel(axes[1], fontsize=8)
    ax.tick_params(labelsize=7)


def variance_explained(ratio: np.ndarray, k: int, path: Path, title: str) -> Path:
    fig, ax = subplots(figsize=(6, 4))
    n = np.arange(1, len(ratio) + 1)
    ax.plot(n, np.cumsum(ratio), marker=".", label="cumulative")
    ax.bar(n, ratio, alpha=0.5, label="per component")
    ax.axhline(0.95, color="grey", ls="--", lw=0.8)
    ax.axvline(k, color="red", ls=":", lw=0.8, label=f"k = {k} (ICA)")
    ax.set_xlabel("principal components")
    ax.set_ylabel("variance explained")
    ax.set_ylim(0, 1.02)
    ax.legend()
    ax.set_title(title)
    return _save(fig, path)


def trajectories(
    background: np.ndarray, paths: list[np.ndarray], path: Path, title: str, axes: tuple[str, str]
) -> Path:
    """Episode paths (arrows from step to step) over the grey cloud of all points."""
    import matplotlib  # lazy: slow to import; loaded already by the figure being drawn

    cols = 4
    rows = -(-len(paths) // cols)
    fig, grid = subplots(rows, cols, figsize=(4 * cols, 3.6 * rows), squeeze=False)
    for i, (ax, p) in enumerate(zip(grid.flat, paths, strict=False)):
        ax.scatter(background[:, 0], background[:, 1], s=0.5, c="lightgrey", rasterized=True, linewidths=0)
        colours = matplotlib.colormaps["plasma"](np.linspace(0, 1, max(len(p) - 1, 1)))
        for t in range(len(p) - 1):
            ax.annotate(
                "", xy=p[t + 1], xytext=p[t], arrowprops={"arrowstyle": "->", "color": colours[t], "lw": 0.8}
            )
        ax.scatter(*p[0], c="green", s=20, zorder=3)
        ax.scatter(*p[-1], c="red", s=20, zorder=3)
        ax.set_title(f"episode {i}: {len(p)} steps", fontsize=9)
        ax.tick_params(labelsize=6)
        ax.set_xlabel(axes[0], fontsize=7)
        ax.set_ylabel(axes[1], fontsize=7)
    for ax in list(grid.flat)[len(paths) :]:
        ax.axis("off")
    fig.suptitle(title)
    return _save(fig, path)


def histograms(
    values: np.ndarray, path: Path, title: str, label: str, extra: dict[str, np.ndarray] | None = None
) -> Path:
    """One histogram per column (e.g. per IC), ``extra`` columns of other sets overlaid."""
    k = values.shape[1]
    cols = min(4, k)
    rows = -(-k // cols)
    fig, grid = subplots(rows, cols, figsize=(3.2 * cols, 2.4 * rows), squeeze=False)
    for m, ax in enumerate(grid.flat[:k]):
        lo, hi = np.percentile(values[:, m], [0.1, 99.9])
        bins = np.linspace(lo, hi, 60) if hi > lo else 30
        ax.hist(values[:, m], bins=bins, density=True, alpha=0.7, label="real")
        for name, other in (extra or {}).items():
            ax.hist(np.clip(other[:, m], lo, hi), bins=bins, density=True, histtype="step", label=name)
        ax.set_title(f"{label} {m}", fontsize=9)
        ax.tick_params(labelsize=6)
    if extra:
        grid.flat[0].legend(fontsize=6)
    for ax in list(grid.flat)[k:]:
        ax.axis("off")
    fig.suptitle(title)
    return _save(fig, path)


def overlays(
    real: dict,
    generated: dict,
    shown: np.ndarray,
    pairs: list[tuple[str, str, int, int, str]],
    path: Path,
    title: str,
) -> Path:
    """Generated points (black) over the real cloud (grey), one panel per coordinate pair
    ``(x label, y label, x column, y column, array name)``."""
    fig, grid = subplots(1, len(pairs), figsize=(5 * len(pairs), 4.4), squeeze=False)
    for ax, (xl, yl, i, j, name) in zip(grid.flat, pairs, strict=True):
        if max(i, j) >= real[name].shape[1]:
            ax.axis("off")
            continue
        ax.scatter(
            real[name][shown, i], real[name][shown, j], s=1, c="lightgrey", rasterized=True, linewidths=0
        )
        ax.scatter(
            generated[name][:, i], generated[name][:, j], s=3, c="black", rasterized=True, linewidths=0
        )
        ax.set_xlabel(xl)
        ax.set_ylabel(yl)
    fig.suptitle(title)
    return _save(fig, path)


def drift(generated: dict, summary: dict, path: Path) -> Path:
    """How far dreamed states lie from the nearest real state, per simulated step, against real states'
    own nearest-neighbour distances (band: their 10-90 % range, line: their median)."""
    fig, ax = subplots(figsize=(6.4, 4))
    near, steps = generated["nearest_real"], generated["step"]
    ts = np.unique(steps)
    for q, style in ((50, "-"), (90, "--")):
        ax.plot(
            ts,
            [np.percentile(near[steps == t], q) for t in ts],
            style,
            color="black",
            label=f"dreamed states, {q}th percentile",
        )
    base = summary["real_to_real"]
    ax.axhspan(base["p10"], base["p90"], color="tab:blue", alpha=0.2, label="real to real, 10-90 %")
    ax.axhline(base["p50"], color="tab:blue", label="real to real, median")
    if summary["median_ratio"] > 20:  # both scales readable when the dream has left the cloud far behind
        ax.set_yscale("log")
    ax.set_xlabel("simulated step")
    ax.set_ylabel("distance to the nearest real state (z-scored units)")
    ax.set_title(f"drift of dreamed states (median ratio {summary['median_ratio']:.2f})")
    ax.legend(fontsize=7)
    return _save(fig, path)
