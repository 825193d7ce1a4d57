"""The world model's bottleneck vectors, informed vs random init (``proclab analyze bottleneck``).

As the seed's ``bottleneck_vec_analysis`` (whose config-key typo kept it from running): the
per-sample ``bottleneck`` vectors of informed-init samples are standardised and PCA'd
(``--pcs``), random-init vectors are projected onto the informed PCs, all vectors are Ward
clustered (kNN connectivity, ``--clusters``) on the PCs that explain 95 % of the informed
variance and mapped by t-SNE. A two-sample test says whether random vectors come from the
informed vectors' distribution: the unbiased squared MMD with a Gaussian kernel (median
distance bandwidth) on the standardised vectors, with a permutation p-value (at most
``--test-points`` vectors per group, seeded). Outputs in ``ANALYSIS/bottleneck/``:
``bottleneck.npz``, ``summary.json``, PCA and t-SNE scatters coloured by init and cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from proclab.errors import ProclabError
from proclab.interpret.stats.clustering import (
    check_clusters,
    mmd_test,
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
class BottleneckSettings:
    """What :func:`write_bottleneck` fits and draws (``analyze bottleneck``'s options of these names)."""

    pcs: int = 128  # principal components of the standardised informed vectors (the random ones projected)
    clusters: int = 100  # Ward clusters (kNN connectivity) of the vectors
    permutations: int = 1000  # permutations for the p-value of the informed-vs-random MMD test
    test_points: int = 2000  # vectors per group used by the MMD test (a seeded subsample beyond this)
    perplexity: float = 30.0  # t-SNE perplexity
    plots: bool = True  # write the PNG plots
    seed: int = 0  # seed of t-SNE, the silhouette's sample, the MMD test's subsamples and its permutations


NAME = "bottleneck"
FIELD = "bottleneck"
INITS = ("informed", "random")


def _vectors(path: Path, default_init: str | None) -> tuple[np.ndarray, np.ndarray]:
    """A sample store's bottleneck vectors and their init (0 informed, 1 random), from its ``init`` field
    (``default_init`` for a store without one)."""
    store = EpisodeStore(path)
    if FIELD not in store.episode_fields:
        raise ProclabError(
            f"episode store {str(path)!r} has no per-episode {FIELD} (a recording, not a world-model sample "
            "store?); analyze bottleneck needs the output of proclab wm sample"
        )
    vectors = store.read_episode_field(FIELD).astype(np.float64)
    if "init" in store.episodes:
        init = np.array([INITS.index(v) if v in INITS else -1 for v in store.episodes["init"]])
        if (init < 0).any():
            raise ProclabError(f"episode store {str(path)!r} has init values other than {', '.join(INITS)}")
    else:
        init = np.full(len(vectors), INITS.index(default_init or "informed"))
    return vectors, init


def write_bottleneck(
    ws: Workspace, samples: Path | None, random_samples: Path | None, settings: BottleneckSettings
) -> tuple[list[Path], dict]:
    """The maps and the test of the bottleneck vectors of ``samples`` (default: the folder's sample store) and
    ``random_samples``, written into ``ANALYSIS/bottleneck/``; returns the files and the summary."""
    samples, vectors, init = _inputs(ws, samples, random_samples, settings.clusters)
    with phases(5, "analyze bottleneck") as ph:
        with ph.phase("pca"):
            # every vector on the informed vectors' PCs, so random ones are seen in their coordinates
            pcs, ratio = standard_pca(vectors, np.flatnonzero(init == 0), settings.pcs)
            n95 = pcs_to(ratio, 0.95)
        everyone = np.arange(len(vectors))
        with ph.phase("ward clusters"):
            clusters = ward_fit_assign(pcs[:, :n95], everyone, settings.clusters)
            sil = silhouette(pcs[:, :n95], clusters, settings.seed)
        with ph.phase("t-sne"):
            tsne = tsne_fit_assign(pcs[:, :n95], everyone, settings.perplexity, settings.seed)
        with ph.phase("two-sample test"):
            test = _informed_vs_random(vectors, init, settings)
        out = ws.command_dir(NAME)
        with ph.phase("writing"):
            arrays = {"init": init, "pcs": pcs, "clusters": clusters, "tsne": tsne}
            save_npz(out / "bottleneck.npz", "bottleneck arrays", **arrays)
            files = [out / "bottleneck.npz"]
            if settings.plots:
                files += _plots(out, arrays, settings)
    fits = {"ratio": ratio, "n95": n95, "sil": sil, "test": test}
    return files, _summary(settings, samples, random_samples, vectors.shape[1], arrays, fits, ph.seconds)


def _inputs(
    ws, given: Path | None, random_samples: Path | None, clusters: int
) -> tuple[Path, np.ndarray, np.ndarray]:
    """The sample store, and the vectors and inits of it and ``--random-samples`` together, checked
    (same dimension, two informed vectors, a feasible cluster count) before any long work."""
    samples = ws.input_path("samples", given, "--samples SAMPLES")
    vectors, init = _vectors(samples, None)
    if random_samples is not None:
        more, more_init = _vectors(random_samples, "random")
        if more.shape[1] != vectors.shape[1]:
            raise ProclabError(
                f"--random-samples {str(random_samples)!r} has {more.shape[1]}-d bottleneck vectors; "
                f"{str(samples)!r} has {vectors.shape[1]}-d"
            )
        vectors, init = np.concatenate([vectors, more]), np.concatenate([init, more_init])
    ws.require_inputs(samples=samples)
    informed = int(np.sum(init == 0))
    if informed < 2:
        raise ProclabError(f"{str(samples)!r} holds {informed} informed-init samples; need at least 2")
    check_clusters(clusters, len(vectors))
    return samples, vectors, init


def _informed_vs_random(vectors: np.ndarray, init: np.ndarray, settings: BottleneckSettings) -> dict | None:
    """The MMD test on seeded subsamples of the vectors standardised by the informed ones; None with
    fewer than two random."""
    # lazy: scikit-learn is slow to import, only the fits need it
    from sklearn.preprocessing import StandardScaler

    informed, random = np.flatnonzero(init == 0), np.flatnonzero(init == 1)
    if len(random) < 2:
        return None
    z = StandardScaler().fit(vectors[informed]).transform(vectors)
    a = informed[subsample(len(informed), settings.test_points, settings.seed)]
    b = random[subsample(len(random), settings.test_points, settings.seed + 1)]
    return {
        "method": "MMD^2 (unbiased, Gaussian kernel, median bandwidth) on standardised vectors",
        **mmd_test(z[a], z[b], settings.permutations, settings.seed),
    }


def _summary(
    settings: BottleneckSettings,
    samples: Path,
    random_samples: Path | None,
    dim: int,
    a: dict,
    fits: dict,
    seconds,
) -> dict:
    init, clusters, ratio, n_pcs = a["init"], a["clusters"], fits["ratio"], a["pcs"].shape[1]
    random_share = [
        float(np.mean(init[clusters == c] == 1)) if np.any(clusters == c) else None
        for c in range(settings.clusters)
    ]
    maps = pca_cluster_summary(ratio, n_pcs, fits["n95"], clusters, settings.clusters, fits["sil"])
    maps["clusters"]["random_share"] = random_share
    return {
        "samples": str(samples.resolve()),
        "random_samples": str(random_samples) if random_samples else None,
        "informed": int(np.sum(init == 0)),
        "random": int(np.sum(init == 1)),
        "dim": dim,
        **maps,
        "informed_vs_random": fits["test"],
        "seconds": seconds,
    }


def _plots(out: Path, a: dict, args: BottleneckSettings) -> list[Path]:
    panels = [
        figures.Colouring("init", a["init"], INITS),
        figures.Colouring("Ward cluster", a["clusters"], [f"c{c}" for c in range(args.clusters)]),
    ]
    return [
        figures.scatter_grid(
            a["pcs"][:, :2],
            panels,
            out / "pca_scatter.png",
            "bottleneck vectors: PC 0 vs PC 1 (informed PCs)",
            ("PC 0", "PC 1"),
        ),
        figures.scatter_grid(
            a["tsne"], panels, out / "tsne_scatter.png", "bottleneck vectors: t-SNE", ("t-SNE 1", "t-SNE 2")
        ),
    ]
