"""Fit on a subsample, assign every point: outliers, Ward clusters, t-SNE maps, and a two-sample test.

The seed ran these on every point at once (32-64 GB jobs); Ward and t-SNE grow faster than
linearly in the number of points. Here each method is *fitted* on a seeded subsample and every
other point is *assigned* with a cost linear in the number of points:

* **outliers** (:func:`knn_outliers`): the statistic is the median distance to the ``k`` nearest
  neighbours; its mean and std over the subsample (neighbours within the subsample, the point
  itself excluded) set the threshold ``mean + sigma * std``; other points measure their distance
  to the subsample. A point above the threshold is an outlier;
* **Ward** (:func:`ward_fit_assign`): agglomerative Ward linkage constrained by a kNN
  connectivity graph on the subsample; other points join the cluster with the nearest centroid;
* **t-SNE** (:func:`tsne_fit_assign`): openTSNE on the subsample; other points are placed by
  openTSNE's partial embedding (the median of their nearest fitted neighbours' positions, the
  initialisation its ``transform`` optimises from).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from proclab.errors import ProclabError
from proclab.stats.permutation import permutation_p

CHUNK = 65_536  # rows per assignment chunk: bounded memory, linear time


def subsample(n: int, size: int, seed: int) -> np.ndarray:
    """Sorted indices of ``min(n, size)`` points drawn without replacement (all of them if ``size >= n``)."""
    if size >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size, replace=False))


def chunks(n: int, size: int = CHUNK) -> Iterator[slice]:
    for lo in range(0, n, size):
        yield slice(lo, min(n, lo + size))


def check_clusters(n_clusters: int, points: int, what: str = "clusters") -> None:
    if not 1 <= n_clusters <= points:
        raise ProclabError(f"{n_clusters} {what} asked of {points} points; choose 1..{points}")


@dataclass(frozen=True)
class Outliers:
    mask: np.ndarray  # (N,) bool: True = outlier
    distance: np.ndarray  # (N,) median distance to the k nearest subsample points
    threshold: float


def knn_outliers(x: np.ndarray, fit: np.ndarray, k: int = 5, sigma: float = 2.0) -> Outliers:
    """Points whose median distance to their ``k`` nearest neighbours exceeds mean + sigma * std."""
    # lazy: scikit-learn is slow to import, only the fits need it
    from sklearn.neighbors import NearestNeighbors

    if not 1 <= k < len(fit):
        raise ProclabError(f"outlier k {k} needs more than {k} fitted points; got {len(fit)}")
    nn = NearestNeighbors(n_neighbors=k + 1).fit(x[fit])
    distance = np.empty(len(x))
    own = np.zeros(len(x), bool)
    own[fit] = True
    fit_d, _ = nn.kneighbors(x[fit])  # the first neighbour of a fitted point is itself
    distance[fit] = np.median(fit_d[:, 1:], axis=1)
    rest = np.flatnonzero(~own)
    for sl in chunks(len(rest)):
        d, _ = nn.kneighbors(x[rest[sl]], n_neighbors=k)
        distance[rest[sl]] = np.median(d, axis=1)
    threshold = float(distance[fit].mean() + sigma * distance[fit].std())
    return Outliers(distance > threshold, distance, threshold)


def inside_fraction(x_real_fit: np.ndarray, threshold: float, y: np.ndarray, k: int = 5) -> np.ndarray:
    """Whether each row of ``y`` lies inside the real cloud: its kNN median distance to the fitted
    real points is within the real outlier threshold."""
    # lazy: scikit-learn is slow to import, only the fits need it
    from sklearn.neighbors import NearestNeighbors

    nn = NearestNeighbors(n_neighbors=k).fit(x_real_fit)
    out = np.empty(len(y), bool)
    for sl in chunks(len(y)):
        d, _ = nn.kneighbors(y[sl])
        out[sl] = np.median(d, axis=1) <= threshold
    return out


def nearest_distance(reference: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Euclidean distance of each row of ``queries`` to its nearest row of ``reference`` (in chunks)."""
    # lazy: scikit-learn is slow to import, only the fits need it
    from sklearn.neighbors import NearestNeighbors

    nn = NearestNeighbors(n_neighbors=1).fit(reference)
    out = np.empty(len(queries))
    for sl in chunks(len(queries)):
        out[sl] = nn.kneighbors(queries[sl])[0][:, 0]
    return out


def nearest_centroid(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Index of the nearest centroid of every row, in chunks (memory ``CHUNK x clusters``)."""
    out = np.empty(len(x), np.int64)
    c2 = (centroids**2).sum(1)
    for sl in chunks(len(x)):
        out[sl] = np.argmin(c2 - 2 * x[sl] @ centroids.T, axis=1)
    return out


def assign_rest(
    x: np.ndarray, fit: np.ndarray, fitted: np.ndarray, place: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """Per-row values: ``fitted`` (values of the ``fit`` rows) for the fitted rows, ``place(rows)`` for the
    others, in chunks (time linear in the rows, memory bounded)."""
    out = np.empty((len(x), *fitted.shape[1:]), fitted.dtype)
    own = np.zeros(len(x), bool)
    own[fit] = True
    out[fit] = fitted
    rest = np.flatnonzero(~own)
    for sl in chunks(len(rest)):
        out[rest[sl]] = place(x[rest[sl]])
    return out


def ward_fit(xf: np.ndarray, n_clusters: int) -> tuple[np.ndarray, np.ndarray]:
    """Ward clusters of ``xf`` with kNN connectivity (``n_clusters`` neighbours, as the seed); labels
    ordered by decreasing size, and the clusters' centroids."""
    # lazy: scikit-learn is slow to import, only the fits need it
    from sklearn.cluster import AgglomerativeClustering
    from sklearn.neighbors import kneighbors_graph

    check_clusters(n_clusters, len(xf))
    neighbours = min(n_clusters, len(xf) - 1)
    connectivity = kneighbors_graph(xf, neighbours, include_self=False) if neighbours >= 1 else None
    ward = AgglomerativeClustering(n_clusters=n_clusters, linkage="ward", connectivity=connectivity)
    with warnings.catch_warnings():  # a disconnected kNN graph is completed by sklearn, as intended
        warnings.filterwarnings("ignore", message="the number of connected components")
        fitted = ward.fit_predict(xf)
    order = np.argsort(-np.bincount(fitted, minlength=n_clusters), kind="stable")
    fitted = np.argsort(order)[fitted]  # relabel by decreasing size
    return fitted, np.stack([xf[fitted == c].mean(0) for c in range(n_clusters)])


def ward_fit_assign(x: np.ndarray, fit: np.ndarray, n_clusters: int) -> np.ndarray:
    """Ward clusters of the ``fit`` rows; every other row takes the cluster of the nearest centroid."""
    fitted, centroids = ward_fit(x[fit], n_clusters)
    return assign_rest(x, fit, fitted, lambda rows: nearest_centroid(rows, centroids))


def tsne_fit(xf: np.ndarray, perplexity: float, seed: int):
    """openTSNE's 2-D embedding of ``xf`` (PCA initialisation, one thread)."""
    # lazy: openTSNE is slow to import, only t-SNE maps need it
    from openTSNE import TSNE

    perplexity = float(min(perplexity, max(1.0, (len(xf) - 1) / 3)))  # openTSNE needs 3 * perplexity < n
    return TSNE(perplexity=perplexity, random_state=seed, n_jobs=1, initialization="pca").fit(xf)


def tsne_place(embedding, rows: np.ndarray) -> np.ndarray:
    """Positions of new rows in a fitted map: openTSNE's partial embedding (median of the 25 nearest
    fitted points' positions, the start its ``transform`` optimises from)."""
    k = min(25, len(np.asarray(embedding)))
    return np.asarray(embedding.prepare_partial(rows, initialization="median", k=k), np.float32)


def tsne_fit_assign(x: np.ndarray, fit: np.ndarray, perplexity: float, seed: int) -> np.ndarray:
    """2-D t-SNE of the ``fit`` rows; other rows placed by :func:`tsne_place`."""
    embedding = tsne_fit(x[fit], perplexity, seed)
    return assign_rest(x, fit, np.asarray(embedding, np.float32), lambda rows: tsne_place(embedding, rows))


def silhouette(x: np.ndarray, labels: np.ndarray, seed: int, size: int = 5000) -> float | None:
    """Mean silhouette on a seeded sample of ``size`` points (None with fewer than 2 clusters)."""
    # lazy: scikit-learn is slow to import, only the fits need it
    from sklearn.metrics import silhouette_score

    if len(np.unique(labels)) < 2 or len(labels) < 3:
        return None
    size = min(size, len(labels))
    return float(silhouette_score(x, labels, sample_size=size, random_state=seed))


def standard_pca(x: np.ndarray, fit: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """StandardScaler then PCA(``n``), both fitted on the ``fit`` rows; ``(coords of every row (float32),
    explained variance ratio of the kept components)``. ``n`` is capped by the width and the fitted rows."""
    # lazy: scikit-learn is slow to import, only the fits need it
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(x[fit])
    pca = PCA(n_components=min(n, x.shape[1], len(fit)), svd_solver="full", random_state=0)
    pca.fit(scaler.transform(x[fit]))
    out = np.empty((len(x), pca.n_components_), np.float32)
    for sl in chunks(len(x)):
        out[sl] = pca.transform(scaler.transform(x[sl]))
    return out, pca.explained_variance_ratio_


def pcs_to(ratio: np.ndarray, share: float) -> int:
    """Fewest leading components that explain ``share`` of the variance (all of them if they explain less)."""
    return int(min(len(ratio), np.searchsorted(np.cumsum(ratio), share - 1e-12) + 1))


def pca_cluster_summary(
    ratio: np.ndarray, n_pcs: int, n95: int, labels: np.ndarray, n_clusters: int, silhouette: float | None
) -> dict:
    """The ``summary.json`` part shared by the analyses that PCA then Ward-cluster a cloud: variance
    explained by the leading 1, 2, 3, 10 and all kept components, components to 95 %, cluster sizes."""
    return {
        "pcs": n_pcs,
        "variance_explained": {
            str(n): float(ratio[:n].sum()) for n in (1, 2, 3, 10, n_pcs) if n <= len(ratio)
        },
        "pcs_to_95": n95,
        "clusters": {
            "n": n_clusters,
            "space_pcs": n95,
            "silhouette": silhouette,
            "sizes": np.bincount(labels, minlength=n_clusters).tolist(),
        },
    }


def mmd_test(a: np.ndarray, b: np.ndarray, permutations: int, seed: int, batch: int = 64) -> dict:
    """Two-sample test: unbiased squared MMD (Gaussian kernel, median-distance bandwidth) with a
    permutation p-value ``(1 + #{permuted >= observed}) / (1 + permutations)`` (never zero)."""
    # lazy: scikit-learn is slow to import, only the fits need it
    from sklearn.metrics.pairwise import euclidean_distances

    if min(len(a), len(b)) < 2:
        raise ProclabError(f"a two-sample test needs at least 2 points per sample; got {len(a)} and {len(b)}")
    z = np.concatenate([a, b]).astype(np.float64)
    d2 = euclidean_distances(z, squared=True)
    bandwidth2 = max(float(np.median(d2[np.triu_indices(len(z), 1)])), 1e-12)
    kernel = np.exp(-d2 / bandwidth2)
    np.fill_diagonal(kernel, 0.0)  # the unbiased estimate leaves out k(x, x)
    m, p = len(a), len(b)

    def mmd2(first: np.ndarray) -> np.ndarray:
        """Squared MMD of each split (rows of ``first``: 1 marks sample a)."""
        f = first.astype(np.float64)
        g = 1.0 - f
        kf = f @ kernel
        return (
            np.einsum("ij,ij->i", kf, f) / (m * (m - 1))
            + np.einsum("ij,ij->i", g @ kernel, g) / (p * (p - 1))
            - 2 * np.einsum("ij,ij->i", kf, g) / (m * p)
        )

    first = np.arange(m + p) < m
    observed = float(mmd2(first[None])[0])
    rng = np.random.default_rng(seed)
    null = (
        np.concatenate(
            [
                mmd2(np.stack([rng.permutation(first) for _ in range(min(batch, permutations - lo))]))
                for lo in range(0, permutations, batch)
            ]
        )
        if permutations
        else np.zeros(0)
    )
    return {
        "mmd2": observed,
        "p_value": permutation_p(observed, null),
        "permutations": permutations,
        "bandwidth": float(np.sqrt(bandwidth2)),
        "n_a": m,
        "n_b": p,
    }
