"""Stability of directions on a planted basis: non-Gaussian sources are found again by every refit (stable),
directions FastICA picks inside a Gaussian subspace are not; matching against brute force."""

import itertools
from dataclasses import replace

import numpy as np
import pytest

from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.bases.stability import STABLE, cosines, match, stability

D, SOURCES, GAUSSIAN, EPISODES, LENGTH = 12, 4, 3, 60, 50


def planted() -> tuple[np.ndarray, np.ndarray]:
    """States mixed from 4 non-Gaussian sources and 3 Gaussian ones (plus a little isotropic noise)."""
    rng = np.random.default_rng(0)
    n = EPISODES * LENGTH
    s = np.stack(
        [
            rng.laplace(size=n),
            rng.uniform(-1.7, 1.7, n),
            rng.exponential(size=n) - 1,
            rng.choice([-1.0, 1.0], n) + 0.3 * rng.normal(size=n),
            *rng.normal(size=(GAUSSIAN, n)),
        ],
        axis=1,
    )
    mixing = rng.normal(size=(SOURCES + GAUSSIAN, D))
    return s @ mixing + 0.05 * rng.normal(size=(n, D)), mixing


def test_matching_is_the_best_one_to_one_assignment():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(4, 6)), rng.normal(size=(4, 6))
    cos = cosines(a, b)
    best = max(itertools.permutations(range(4)), key=lambda p: sum(cos[i, p[i]] for i in range(4)))
    matched, sim, others = match(a, b)
    assert tuple(matched) == best
    np.testing.assert_allclose(sim, [cos[i, best[i]] for i in range(4)])
    np.testing.assert_allclose(others, [(cos[i].sum() - cos[i, best[i]]) / 3 for i in range(4)])
    flipped = -3.0 * a[[2, 0, 3, 1]]  # sign and length do not matter
    assert list(match(a, flipped)[0]) == [1, 3, 0, 2] and np.allclose(match(a, flipped)[1], 1)


def test_planted_sources_are_stable_and_gaussian_directions_are_not():
    x, mixing = planted()
    config = BasisConfig(n_ics=SOURCES + GAUSSIAN, max_iter=2000, tol=1e-4)
    fitted = Basis.fit(x, config, {})

    def refit(states, seed):
        return Basis.fit(states, replace(config, seed=seed), {}).to_ics

    report = stability(fitted.to_ics, x, np.full(EPISODES, LENGTH), refit, seeds=5, bootstraps=5, seed=0)
    to_source = cosines(fitted.directions("ica"), mixing)  # which planted source row each fitted direction is
    found = to_source[:, :SOURCES].max(1) > 0.95
    assert found.sum() == SOURCES  # the fit recovers every non-Gaussian source
    index = np.array([d["index"] for d in report["directions"]])
    print("index", np.round(index, 3), "found", found)
    assert all(index[found] > 0.9) and all(index[~found] < STABLE)
    assert report["unstable"] == list(np.flatnonzero(~found))
    assert all(d["seeds"]["similarity"] <= 1 + 1e-12 for d in report["directions"])


def test_refits_see_whole_episodes_and_the_same_fit_is_stable():
    calls = []

    def refit(states, seed):
        calls.append((len(states), seed, set(np.round(states[:, 0] // 100).astype(int))))
        return lambda s: s

    rng = np.random.default_rng(0)
    x = rng.normal(size=(25, 3))
    x[:, 0] += np.repeat(np.arange(5) * 100.0, [3, 4, 5, 6, 7])  # which episode a row is
    out = stability(lambda s: s, x, np.array([3, 4, 5, 6, 7]), refit, seeds=2, bootstraps=3, seed=4)
    assert [c[1] for c in calls] == [5, 6, 7, 8, 9] and calls[0][0] == 25
    for n, _, episodes in calls[2:]:  # a resample's length is a sum of whole episodes' lengths
        assert n in {sum(c) for c in itertools.combinations_with_replacement([3, 4, 5, 6, 7], 5)}
        assert episodes <= set(range(5))
    for d in out["directions"]:  # the same fit every time: matched exactly, on its own coordinate
        assert d["seeds"]["similarity"] == pytest.approx(1.0) and d["bootstrap"][
            "similarity"
        ] == pytest.approx(1.0)
