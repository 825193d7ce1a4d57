"""The NMF components of ``analyze hidden`` as coordinates: non-negative codes of a state.

``analyze hidden`` fits NMF on the z-scored states (the folder's basis ``mu``, ``sigma``) shifted
by their per-unit minimum ``s`` over the fitted points, so ``y = max(z - s, 0) >= 0``; the
components ``H`` (``k x D``, non-negative) are saved in ``ANALYSIS/nmf.npz``. A state's code is
the non-negative least-squares solution ``c = argmin_{c >= 0} ||y - c H||^2`` (what scikit-learn's
``NMF.transform`` converges to), and ``decode(c) = (c H + s) sigma + mu``; coordinate ``m``'s
state direction is ``H[m] * sigma``.

The code is computed in torch by FISTA (accelerated projected gradient, a fixed number of
iterations from zero): batched over states and differentiable, so the sweep can hold an NMF
coordinate at every step of a played episode and saliency can differentiate it. Tests compare it
with ``scipy.optimize.nnls`` per state.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from proclab.errors import ProclabError
from proclab.interpret.bases.coordinates import Coordinates, tensors_like
from proclab.interpret.bases.pca_ica import Basis

FILE = "nmf.npz"
FORMAT = "proclab-nmf"
ITERATIONS = 400


def save_nmf(path: Path, components: np.ndarray, shift: np.ndarray) -> Path:
    """Write the components ``H`` and the shift ``s`` of a fitted NMF (atomically)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp.npz")
    np.savez(tmp, components=components, shift=shift, meta=np.array(json.dumps({"format": FORMAT})))
    tmp.replace(path)
    return path


class NmfCoordinates(Coordinates):
    """The NMF codes of states (see the module docstring), on the z-scoring of ``basis``."""

    name, label, nonnegative = "nmf", "NMF", True

    def __init__(self, basis: Basis, components: np.ndarray, shift: np.ndarray, iterations: int = ITERATIONS):
        self.h = np.asarray(components, np.float64)
        self.shift = np.asarray(shift, np.float64)
        self.mean, self.std = basis.mean, basis.std
        self.k, self.dim = self.h.shape
        gram = self.h @ self.h.T
        self.step = 1.0 / max(float(np.linalg.eigvalsh(gram).max()), 1e-12)
        self.iterations = iterations
        self._cache: dict[tuple, dict[str, Tensor]] = {}

    @classmethod
    def load(cls, path: Path, basis: Basis) -> NmfCoordinates:
        try:
            with np.load(path, allow_pickle=False) as f:
                components, shift, meta = f["components"], f["shift"], json.loads(str(f["meta"]))
        except (OSError, ValueError, KeyError) as err:
            raise ProclabError(f"{str(path)!r} is not a saved NMF ({err})") from None
        if meta.get("format") != FORMAT or components.shape[1] != basis.dim:
            raise ProclabError(f"{str(path)!r} is not an NMF of this folder's {basis.dim}-d states")
        return cls(basis, components, shift)

    def _t(self, like: Tensor) -> dict[str, Tensor]:
        arrays = {"h": self.h, "shift": self.shift, "mean": self.mean, "std": self.std}
        return tensors_like(self._cache, arrays, like)

    def encode(self, h: Tensor) -> Tensor:
        p = self._t(h)
        y = torch.clamp((h - p["mean"]) / p["std"] - p["shift"], min=0)
        return nnls_fista(y, p["h"], self.step, self.iterations)

    def decode(self, c: Tensor) -> Tensor:
        p = self._t(c)
        return (c @ p["h"] + p["shift"]) * p["std"] + p["mean"]

    def write(self, h: Tensor, c: Tensor, c_new: Tensor) -> Tensor:
        """Linear: ``h + ((c_new - c) H) sigma``, exactly ``h`` when the codes are equal."""
        p = self._t(h)
        return h + ((c_new - c) @ p["h"]) * p["std"]

    def directions(self) -> np.ndarray:
        return self.h * self.std


def nnls_fista(y: Tensor, h: Tensor, step: float, iterations: int) -> Tensor:
    """``argmin_{c >= 0} ||y - c h||^2`` per row of ``y`` (``(N, D)``, ``h`` ``(k, D)``), by FISTA with
    step ``step`` (at most one over the largest eigenvalue of ``h h^T``) from ``c = 0``."""
    gram, target = h @ h.T, y @ h.T
    c = torch.zeros(len(y), len(h), dtype=y.dtype, device=y.device)
    z, t = c, 1.0
    for _ in range(iterations):
        c_next = torch.clamp(z - step * (z @ gram - target), min=0)
        t_next = (1 + (1 + 4 * t * t) ** 0.5) / 2
        z = c_next + ((t - 1) / t_next) * (c_next - c)
        c, t = c_next, t_next
    return c
