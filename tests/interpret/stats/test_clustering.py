"""Fit on a subsample, assign the rest: planted clusters and outliers are recovered; the MMD test."""

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from proclab.errors import ProclabError
from proclab.interpret.stats.clustering import (
    check_clusters,
    knn_outliers,
    mmd_test,
    nearest_centroid,
    pcs_to,
    standard_pca,
    subsample,
    tsne_fit_assign,
    ward_fit_assign,
)


def blobs(n: int = 3000, d: int = 8, k: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d)) * 6
    labels = rng.integers(0, k, n)
    return centres[labels] + rng.normal(size=(n, d)), labels


def test_ward_on_a_subsample_then_nearest_centroid_recovers_planted_clusters():
    x, truth = blobs()
    fit = subsample(len(x), 600, seed=1)
    labels = ward_fit_assign(x, fit, 5)
    assert adjusted_rand_score(truth, labels) > 0.9
    rest = np.setdiff1d(np.arange(len(x)), fit)
    assert adjusted_rand_score(truth[rest], labels[rest]) > 0.9  # the assigned points on their own
    sizes = np.bincount(labels[fit])
    assert (np.diff(sizes) <= 0).all()  # labelled by decreasing size


def test_nearest_centroid_matches_the_obvious_loop():
    rng = np.random.default_rng(2)
    x, c = rng.normal(size=(200, 4)), rng.normal(size=(7, 4))
    slow = [int(np.argmin([np.linalg.norm(xi - cj) for cj in c])) for xi in x]
    assert nearest_centroid(x, c).tolist() == slow


def test_outlier_removal_drops_planted_far_points():
    x, _ = blobs(n=2000, k=3)
    rng = np.random.default_rng(3)
    far = rng.normal(size=(20, x.shape[1])) * 5 + 60  # far from every blob
    data = np.concatenate([x, far])
    fit = subsample(len(data), 800, seed=4)
    out = knn_outliers(data, fit, k=5, sigma=2.0)
    assert out.mask[len(x) :].all()
    assert out.mask[: len(x)].mean() < 0.05
    # the statistic of a fitted point excludes itself: the slow definition on one of them
    i = fit[0]
    d = np.sort(np.linalg.norm(data[fit] - data[i], axis=1))[1:6]
    assert out.distance[i] == pytest.approx(np.median(d))


def test_tsne_places_assigned_points_beside_their_cluster():
    x, truth = blobs(n=1500, k=4, seed=5)
    fit = subsample(len(x), 500, seed=6)
    emb = tsne_fit_assign(x, fit, perplexity=30, seed=0)
    assert emb.shape == (len(x), 2) and np.isfinite(emb).all()
    rest = np.setdiff1d(np.arange(len(x)), fit)
    # an assigned point's nearest fitted point in the map is from its own cluster
    d = ((emb[rest, None, :] - emb[None, fit, :]) ** 2).sum(-1)
    assert (truth[fit][d.argmin(1)] == truth[rest]).mean() > 0.95


def test_mmd_matches_a_slow_reference_and_separates_distributions():
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=(40, 3)), rng.normal(size=(30, 3)) + 1.0
    got = mmd_test(a, b, permutations=200, seed=0)
    z = np.concatenate([a, b])
    h2 = np.median([np.sum((z[i] - z[j]) ** 2) for i in range(70) for j in range(i + 1, 70)])
    k = lambda u, v: np.exp(-np.sum((u - v) ** 2) / h2)  # noqa: E731
    kaa = np.mean([k(a[i], a[j]) for i in range(40) for j in range(40) if i != j])
    kbb = np.mean([k(b[i], b[j]) for i in range(30) for j in range(30) if i != j])
    kab = np.mean([k(u, v) for u in a for v in b])
    assert got["mmd2"] == pytest.approx(kaa + kbb - 2 * kab, rel=1e-9)
    assert got["p_value"] < 0.01
    same = mmd_test(a, rng.normal(size=(30, 3)), permutations=200, seed=0)
    assert same["p_value"] > 0.05


def test_more_clusters_than_points_is_refused():
    with pytest.raises(ProclabError, match="40 clusters asked of 30 points"):
        check_clusters(40, 30)
    x, _ = blobs(n=30)
    with pytest.raises(ProclabError, match="clusters asked"):
        ward_fit_assign(x, np.arange(30), 31)


def test_pcs_to_and_standard_pca():
    ratio = np.array([0.5, 0.3, 0.15, 0.05])
    assert [pcs_to(ratio, s) for s in (0.5, 0.8, 0.95, 1.0)] == [1, 2, 3, 4]
    rng = np.random.default_rng(8)
    x = rng.normal(size=(300, 6)) * [1, 2, 3, 4, 5, 6] + 10
    coords, explained = standard_pca(x, np.arange(300), 4)
    z = (x - x.mean(0)) / x.std(0)
    cov_eigs = np.sort(np.linalg.eigvalsh(np.cov(z.T)))[::-1]
    np.testing.assert_allclose(explained, cov_eigs[:4] / cov_eigs.sum(), rtol=1e-6)
    np.testing.assert_allclose(coords.var(0, ddof=1), cov_eigs[:4], rtol=1e-4)
    part, _ = standard_pca(x, subsample(300, 100, seed=0), 2)  # fitted on a third, applied to all
    assert part.shape == (300, 2) and np.isfinite(part).all()
