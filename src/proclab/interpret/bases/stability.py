"""Stable directions: is a direction found again when the basis is fitted again?

FastICA starts from a random unmixing matrix and a sparse dictionary from random atoms, and both see
one sample of episodes. A direction that a new seed or another sample of episodes does not find
again is a property of one fit, not of the agent, and no claim should rest on it. Following ICASSO
(Himberg, Hyvarinen and Esposito 2004), the basis is fitted again ``seeds`` times on the same states
with new seeds, and ``bootstraps`` times on resamples of whole episodes (with replacement, so the
steps of one episode stay together) with new seeds too. Each refit's directions are matched one to
one to the reference fit's by the Hungarian algorithm on the absolute cosine similarity of the
state-space directions (a direction's sign and length are arbitrary), and per reference direction:

* ``similarity``: the mean over refits of the matched ``|cos|`` (ICASSO's intra-cluster similarity);
* ``crosstalk``: the mean over refits of the mean ``|cos|`` to the refit's other directions (its
  extra-cluster similarity);
* ``index``: ``similarity - crosstalk``, ICASSO's quality index ``Iq``, 1 for a direction found
  exactly every time and orthogonal to the rest, near 0 for one that lands anywhere.

A direction is **stable** when its index is at least :data:`STABLE` on the seed refits and on the
bootstrap refits alike (reported apart: the first is the algorithm's own randomness, the second the
data's). Sources that are not Gaussian are found again; directions ICA picks inside a Gaussian
subspace (where no rotation is preferred) are not, which the planted-basis test checks. Refits with
new seeds alone rarely tell them apart (FastICA converges to the same rotation of the same sample):
the bootstrap refits do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
from scipy.optimize import linear_sum_assignment

from proclab.errors import ProclabError
from proclab.interpret.bases.coordinates import LinearCoordinates, encode_all
from proclab.interpret.bases.pca_ica import Basis
from proclab.interpret.bases.sparse_dictionary import SparseDictionary
from proclab.stats.bootstrap import cluster_resamples

STABLE = 0.95
"""Least quality index (on seed and bootstrap refits) of a stable direction. A convention, like
ICASSO's: on the planted basis of the tests (3,000 states of 60 episodes) refits on resampled episodes
find a non-Gaussian source again at 0.97-0.99, while directions inside a 3-d Gaussian subspace reach
0.72-0.90 (the Hungarian match picks the best of their rotations, so they never fall near 0); the
index of every direction is reported beside the flag."""

ROWS = 20_000
"""States (a seeded sample) on which refits' coordinates are compared."""

Encoder = Callable[[np.ndarray], np.ndarray]
"""``(N, D)`` states -> ``(N, k)`` coordinates of one fit."""
Refit = Callable[[np.ndarray, int], Encoder]
"""``(states, seed) -> encoder`` of a basis fitted on ``states`` with seed ``seed``."""


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|cos|`` between every row of ``a`` (``(k, D)``) and of ``b`` (``(j, D)``)."""
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-300)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-300)
    return np.abs(a @ b.T)


def match(reference: np.ndarray, other: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One-to-one matching of ``reference``'s rows to ``other``'s maximising the summed ``|cos|``: per
    reference row its match's index and ``|cos|``, and its mean ``|cos|`` to the others."""
    cos = cosines(reference, other)
    rows, cols = linear_sum_assignment(-cos)
    matched = np.full(len(reference), -1)
    matched[rows] = cols
    sim = np.where(matched >= 0, cos[np.arange(len(reference)), np.maximum(matched, 0)], 0.0)
    others = (cos.sum(1) - sim) / max(1, cos.shape[1] - 1)
    return matched, sim, others


def _signals(codes: np.ndarray) -> np.ndarray:
    """``(N, k)`` coordinates -> ``(k, N)`` centred rows (whose cosines are correlations)."""
    codes = np.asarray(codes, np.float64)
    return (codes - codes.mean(0)).T


def quality(reference: np.ndarray, refits: list[np.ndarray]) -> dict:
    """Per reference coordinate (``reference``: ``(N, k)`` on some states, ``refits``: each ``(N, j)`` on the
    same states): ``similarity``, ``crosstalk`` and ``index``, and the matched ``|corr|`` of every refit."""
    if not refits:
        raise ValueError("stability needs at least one refit")
    ref = _signals(reference)
    sims, others = zip(*(match(ref, _signals(r))[1:] for r in refits), strict=True)
    sims, others = np.stack(sims), np.stack(others)
    return {
        "similarity": sims.mean(0),
        "crosstalk": others.mean(0),
        "index": sims.mean(0) - others.mean(0),
        "matched": sims,
    }


def stability(
    reference: Encoder,
    x: np.ndarray,
    lengths: np.ndarray,
    refit: Refit,
    *,
    seeds: int,
    bootstraps: int,
    seed: int,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """The stability of the fit ``reference`` against ``seeds`` refits on the states ``x`` (rows of
    consecutive episodes of ``lengths``) and ``bootstraps`` refits on resampled episodes."""
    lengths = np.asarray(lengths, np.int64)
    rng = np.random.default_rng([seed, 17])
    shown = x[np.sort(rng.choice(len(x), min(ROWS, len(x)), replace=False))]
    codes = reference(shown)
    total, failed = seeds + bootstraps, 0
    fits: dict[str, list[np.ndarray]] = {"seeds": [], "bootstrap": []}
    resampled = cluster_resamples(np.repeat(np.arange(len(lengths)), lengths), bootstraps, rng)
    for r in range(total):
        rows = None if r < seeds else next(resampled)
        try:
            found = refit(x if rows is None else x[rows], seed + 1 + r)(shown)
        except ProclabError as err:
            if rows is None:  # the states themselves cannot be fitted again
                return {"note": f"not measured: a refit on these states fails ({err})"}
            found, failed = np.zeros_like(codes), failed + 1  # a resample that cannot be fitted finds nothing
        fits["seeds" if rows is None else "bootstrap"].append(found)
        if progress is not None:
            progress(r + 1, total)
    parts = {name: quality(codes, f) for name, f in fits.items() if f}
    index = np.min([p["index"] for p in parts.values()], axis=0)
    per = []
    for m in range(codes.shape[1]):
        row = {
            name: {k: float(p[k][m]) for k in ("similarity", "crosstalk", "index")}
            for name, p in parts.items()
        }
        per.append({"direction": m, **row, "index": float(index[m]), "stable": bool(index[m] >= STABLE)})
    return {
        "seeds": seeds,
        "bootstraps": bootstraps,
        "failed_bootstraps": failed,
        "threshold": STABLE,
        "rule": f"ICASSO quality index (matched |corr| minus mean |corr| to the others) >= {STABLE} on the "
        "seed refits and on the episode-bootstrap refits",
        "directions": per,
        "unstable": [p["direction"] for p in per if not p["stable"]],
    }


def refitter(coords) -> Refit | None:
    """How to fit ``coords``'s system again with another seed on other states (its own configuration):
    PCA/ICA bases and sparse dictionaries; None for a system that cannot be refitted here (NMF)."""
    if isinstance(coords, LinearCoordinates):
        basis, kind = coords.basis, coords.kind

        def linear(states: np.ndarray, seed: int) -> Encoder:
            fitted = Basis.fit(states, replace(basis.config, seed=seed), {})
            return lambda h: fitted.to_coords(h, kind)

        return linear
    if isinstance(coords, SparseDictionary):

        def sparse(states: np.ndarray, seed: int) -> Encoder:
            fitted = SparseDictionary.fit(states, replace(coords.config, seed=seed))
            return lambda h: encode_all(fitted, h)

        return sparse
    return None
