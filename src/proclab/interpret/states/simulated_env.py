"""The world model's environment states ``env_h`` of a sample store (``proclab analyze env``).

As the seed's ``env_h_analysis``: StandardScaler and PCA (``--pcs``, 128) of the per-step
deterministic RSSM state, Ward clusters (kNN connectivity, ``--clusters``, 128) on the PCs that
explain 95 % of the variance, and a 2-D t-SNE, each fitted on a seeded subsample and assigned to
every point. Outputs in ``ANALYSIS/env/``: ``env.npz`` (episode, step, pcs, clusters, tsne),
``summary.json`` and scatter plots coloured by cluster, sample step, the agent's action and
value, and the predicted reward.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from proclab.envs.actions import ACTION_NAMES
from proclab.errors import ProclabError
from proclab.interpret.bases.activations import step_index
from proclab.interpret.stats.clustering import (
    check_clusters,
    pca_cluster_summary,
    pcs_to,
    silhouette,
    standard_pca,
    subsample,
    tsne_fit_assign,
    ward_fit_assign,
)
from proclab.interpret.workspace import figures
from proclab.interpret.workspace.folder import Workspace
from proclab.io.files import save_npz
from proclab.io.progress import phases
from proclab.store.store import EpisodeStore


@dataclass(frozen=True)
class EnvSettings:
    """What :func:`write_env` fits and draws (``analyze env``'s options of these names)."""

    pcs: int = 128  # principal components kept of the standardised env states
    clusters: int = 128  # Ward clusters (kNN connectivity) on the PCs that explain 95 % of the variance
    fit_points: int = 20_000  # Ward and t-SNE fitted on a seeded subsample this big, the rest assigned
    perplexity: float = 30.0  # t-SNE perplexity
    plot_points: int = 20_000  # points drawn in the scatter plots (a seeded subsample)
    plots: bool = True  # write the PNG plots
    seed: int = 0  # seed of the fitting subsample, t-SNE, the silhouette's sample and the plotted points


NAME = "env"
FIELD = "env_h"


@dataclass(frozen=True)
class EnvMap:
    """The fitted maps of the env states: PCs, Ward clusters on the PCs explaining 95 % of the variance,
    and a t-SNE of the same PCs, each fitted on the rows ``fit`` and assigned to every point."""

    fit: np.ndarray
    pcs: np.ndarray
    ratio: np.ndarray
    """Explained variance ratio of each PC."""
    n95: int
    clusters: np.ndarray
    silhouette: float | None
    tsne: np.ndarray


def write_env(ws: Workspace, samples: Path | None, settings: EnvSettings) -> tuple[list[Path], dict]:
    """The maps of the env states of ``samples`` (default: the folder's sample store), written into
    ``ANALYSIS/env/``; returns the files and the summary."""
    samples = ws.input_path("samples", samples, "--samples SAMPLES")
    store = _sample_store(samples)
    ws.require_inputs(samples=samples)
    episodes = np.arange(store.num_episodes)
    check_clusters(settings.clusters, min(store.num_steps, settings.fit_points))
    with phases(5, "analyze env") as ph:
        with ph.phase("reading env states"):
            x = store.read_steps(FIELD, episodes).astype(np.float32)
            episode, step = step_index(store, episodes)
            attrs = {
                k: store.read_steps(k, episodes)
                for k in ("action", "value", "reward")
                if k in store.step_fields
            }
        m = _fit_maps(x, settings, ph)
        out = ws.command_dir(NAME)
        with ph.phase("writing"):
            arrays = {
                "episode": episode,
                "step": step,
                "pcs": m.pcs,
                "clusters": m.clusters,
                "tsne": m.tsne,
                **attrs,
            }
            save_npz(out / "env.npz", "environment-state arrays", **arrays)
            files = [out / "env.npz"]
            if settings.plots:
                files += _plots(out, arrays, settings)
    summary = {
        "samples": str(samples.resolve()),
        "episodes": len(episodes),
        "points": len(x),
        "dim": x.shape[1],
        **_map_summary(m, settings.clusters),
        "seconds": ph.seconds,
    }
    return files, summary


def _sample_store(samples: Path) -> EpisodeStore:
    """The sample store at ``samples``; refused unless it has ``env_h``, which only world-model samples
    carry (a recording of the real game has no RSSM state)."""
    store = EpisodeStore(samples)
    if FIELD not in store.step_fields:
        raise ProclabError(
            f"episode store {str(samples)!r} has no per-step {FIELD} (a recording, not a world-model sample "
            f"store?); analyze env needs the output of proclab wm sample. Its fields: {', '.join(store.fields)}"
        )
    return store


def _fit_maps(x: np.ndarray, settings: EnvSettings, ph) -> EnvMap:
    """PCA, Ward clusters and t-SNE of the env states ``x``, one phase of ``ph`` each."""
    with ph.phase("pca"):
        fit = subsample(len(x), settings.fit_points, settings.seed)
        pcs, ratio = standard_pca(x, fit, settings.pcs)
        n95 = pcs_to(ratio, 0.95)
    with ph.phase("ward clusters"):
        clusters = ward_fit_assign(pcs[:, :n95], fit, settings.clusters)
        sil = silhouette(pcs[fit, :n95], clusters[fit], settings.seed)
    with ph.phase("t-sne"):
        tsne = tsne_fit_assign(pcs[:, :n95], fit, settings.perplexity, settings.seed)
    return EnvMap(fit, pcs, ratio, n95, clusters, sil, tsne)


def _map_summary(m: EnvMap, n_clusters: int) -> dict:
    """The fitted maps' part of ``summary.json``: subsample size, variance explained, cluster sizes."""
    return {"fit_points": len(m.fit)} | pca_cluster_summary(
        m.ratio, m.pcs.shape[1], m.n95, m.clusters, n_clusters, m.silhouette
    )


def _plots(out: Path, a: dict, args: EnvSettings) -> list[Path]:
    shown = subsample(len(a["pcs"]), args.plot_points, args.seed + 1)
    panels = [
        figures.Colouring("Ward cluster", a["clusters"][shown], [f"c{c}" for c in range(args.clusters)]),
        figures.Colouring("sample step", a["step"][shown]),
        figures.Colouring("action", a["action"][shown], ACTION_NAMES) if "action" in a else None,
        figures.Colouring("agent value", a["value"][shown]) if "value" in a else None,
        figures.Colouring("predicted reward", a["reward"][shown]) if "reward" in a else None,
    ]
    panels = [p for p in panels if p is not None]
    return [
        figures.scatter_grid(
            a["pcs"][shown, :2], panels, out / "pca_scatter.png", "env states: PC 0 vs PC 1", ("PC 0", "PC 1")
        ),
        figures.scatter_grid(
            a["tsne"][shown], panels, out / "tsne_scatter.png", "env states: t-SNE", ("t-SNE 1", "t-SNE 2")
        ),
    ]
