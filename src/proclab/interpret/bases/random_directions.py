"""Random directions: the baseline a basis's directions are measured against.

"5 of 16 ICs change return" means little without the rate for directions no method chose. A
:class:`WithRandom` appends ``n`` random unit directions to a basis's coordinates, so one sweep plays
both on the same levels, with the same arms, beside the same baseline.

**The space.** Each random direction is drawn uniformly from the unit sphere of the span of the
basis's own directions (the span of its first ``k`` principal components for PCA and ICA; the whole
state space for an overcomplete dictionary): the space the method chose its directions from, so a
random direction is a direction the method could have returned but did not.

**The scale.** A random direction's coordinate is the state's projection on it, ``c = h . u``. Every
arm places a coordinate by the recorded distribution of that coordinate (its mean, its 5th or 95th
percentile, a recorded value), so a random direction is held at the same quantiles of its own
recorded spread as a basis direction is of its: an edit's size follows how far the recorded states
spread along the direction, for both, and no length has to be chosen for the unit vector (scaling
``u`` scales ``c`` and leaves the held state the same).

Writing back is exact as for every coordinate system: only the one coordinate a row holds changes,
``h' = h + (c'_r - c_r) u_r`` for a random coordinate, the basis's own write for the others.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from proclab.errors import ProclabError
from proclab.interpret.bases.coordinates import Coordinates, tensors_like


def span_sphere(directions: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` unit vectors drawn uniformly from the sphere of the span of ``directions`` (``(k, D)``)."""
    u, s, _ = np.linalg.svd(np.asarray(directions, np.float64).T, full_matrices=False)
    rank = int(np.sum(s > 1e-10 * s[0]))
    g = np.random.default_rng([seed, 7]).normal(size=(n, rank))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    return g @ u[:, :rank].T


class WithRandom(Coordinates):
    """The coordinates of ``base`` (ids ``0..base.k-1``) followed by the projections on ``units``
    (``(n, dim)`` unit vectors; ids ``base.k..base.k+n-1``)."""

    def __init__(self, base: Coordinates, units: np.ndarray):
        units = np.asarray(units, np.float64)
        if units.ndim != 2 or units.shape[1] != base.dim:
            raise ProclabError(f"random directions must be (n, {base.dim}), got {units.shape}")
        self.base, self.units = base, units
        self.first = base.k
        self.k, self.dim = base.k + len(units), base.dim
        self.name, self.label, self.nonnegative = base.name, base.label, base.nonnegative
        self._cache: dict = {}

    @classmethod
    def draw(cls, base: Coordinates, n: int, seed: int) -> WithRandom:
        """``base`` with ``n`` random directions of its span (see the module docstring)."""
        if n < 1:
            raise ProclabError(f"--random-directions must be at least 1, got {n}")
        return cls(base, span_sphere(base.directions(), n, seed))

    def is_random(self, m: int) -> bool:
        return m >= self.first

    def _u(self, like: Tensor) -> Tensor:
        return tensors_like(self._cache, {"u": self.units}, like)["u"]

    def encode(self, h: Tensor) -> Tensor:
        return torch.cat([self.base.encode(h), h @ self._u(h).T], dim=1)

    def decode(self, c: Tensor) -> Tensor:
        return self.base.decode(c[:, : self.first]) + c[:, self.first :] @ self._u(c)

    def write(self, h: Tensor, c: Tensor, c_new: Tensor) -> Tensor:
        k = self.first
        return self.base.write(h, c[:, :k], c_new[:, :k]) + (c_new[:, k:] - c[:, k:]) @ self._u(h)

    def directions(self) -> np.ndarray:
        return np.concatenate([self.base.directions(), self.units])

    def project(self, states: np.ndarray) -> np.ndarray:
        """``(N, dim)`` states -> ``(N, n)`` random coordinates (to place the arms in the recorded data)."""
        return np.asarray(states, np.float64) @ self.units.T
