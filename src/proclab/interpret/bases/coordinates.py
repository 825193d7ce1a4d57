"""The coordinates an intervention edits: a basis seen as an encode/decode pair of a state tensor.

An edit reads a state's coordinates ``c = encode(h)`` (``(N, D)`` -> ``(N, k)``), changes some of
them to ``c'`` and writes the change back, ``h' = h + decode(c') - decode(c)``. What the
coordinates do not describe (the directions a PCA/ICA leaves out, a dictionary's reconstruction
error) is kept as it was, and an edit that changes nothing gives back ``h`` bit for bit: both
decodes are the same computation, so their difference is exactly zero. That is the whole
contract a basis needs for the edits of :class:`~proclab.models.interventions.Coordinates` (holds, swaps,
resampling; :func:`~proclab.models.interventions.edit_coordinates`): a linear basis (PCA, ICA:
:class:`LinearCoordinates`) writes back ``(c' - c) @ directions``, an overcomplete sparse
dictionary only brings its own ``encode`` and ``decode``. Only a linear basis also edits a state's
increments (``encode_change`` / ``decode_change``: coordinates without the origin).
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import torch
from torch import Tensor

from proclab.interpret.bases.pca_ica import Basis, Kind

Array = TypeVar("Array", Tensor, np.ndarray)


class Coordinates:
    """``k`` coordinates of a ``dim``-float state: subclasses give ``encode``, ``decode`` and
    ``directions``; ``name`` is the system's (``ica``, ``sparse``, ...), ``label`` names one
    coordinate (``IC``, ``atom``), ``nonnegative`` says its coordinates are never below zero."""

    k: int
    dim: int
    name: str = "coordinates"
    label: str = "direction"
    nonnegative: bool = False

    def encode(self, h: Tensor) -> Tensor:
        """``(N, dim)`` states -> ``(N, k)`` coordinates."""
        raise NotImplementedError

    def decode(self, c: Tensor) -> Tensor:
        """``(N, k)`` coordinates -> the ``(N, dim)`` part of a state they describe."""
        raise NotImplementedError

    def directions(self) -> np.ndarray:
        """``(k, dim)``: the state change that raising coordinate ``m`` by one makes (what a gradient
        of the state is read along, :mod:`proclab.interpret.atlas.prediction`)."""
        raise NotImplementedError

    def write(self, h: Tensor, c: Tensor, c_new: Tensor) -> Tensor:
        """``h`` (whose coordinates are ``c``) with its coordinates changed to ``c_new``."""
        return h + (self.decode(c_new) - self.decode(c))


class LinearCoordinates(Coordinates):
    """The PCA or ICA coordinates of a :class:`~proclab.interpret.bases.pca_ica.Basis` (``kind``)."""

    def __init__(self, basis: Basis, kind: Kind):
        self.basis, self.kind = basis, kind
        self.k, self.dim = basis.directions(kind).shape
        self.name, self.label = kind, {"ica": "IC", "pca": "PC"}[kind]

    def directions(self) -> np.ndarray:
        return self.basis.directions(self.kind)

    def encode(self, h: Array) -> Array:
        """As :meth:`Coordinates.encode`, on a tensor or a numpy array alike (the basis computes either)."""
        return self.basis.to_coords(h, self.kind)

    def decode(self, c: Tensor) -> Tensor:
        return self.basis.along(c, self.kind) + torch.as_tensor(
            self.basis.origin, dtype=c.dtype, device=c.device
        )

    def write(self, h: Tensor, c: Tensor, c_new: Tensor) -> Tensor:
        """Linear: the origin cancels, ``h + (c_new - c) @ directions`` (exactly ``h`` when equal)."""
        return h + self.basis.along(c_new - c, self.kind)

    def encode_change(self, delta: Tensor) -> Tensor:
        """Coordinates of a state's change (no origin: :meth:`Basis.increment_coords`)."""
        return self.basis.increment_coords(delta, self.kind)

    def decode_change(self, c: Tensor) -> Tensor:
        """The state change that changes the coordinates by ``c``."""
        return self.basis.along(c, self.kind)


def tensors_like(cache: dict, arrays: dict[str, np.ndarray], like: Tensor) -> dict[str, Tensor]:
    """``arrays`` as tensors of ``like``'s dtype and device, made once per (dtype, device) and kept in
    ``cache``; normal tensors even when first asked inside inference mode (autograd may use them later)."""
    key = (like.dtype, like.device)
    if key not in cache:
        with torch.inference_mode(False):
            cache[key] = {
                n: torch.as_tensor(a, dtype=like.dtype, device=like.device) for n, a in arrays.items()
            }
    return cache[key]


def encode_all(coords: Coordinates, x: np.ndarray, chunk: int = 65_536) -> np.ndarray:
    """``(N, D)`` states -> ``(N, k)`` float32 coordinates, in chunks (computed in float64)."""
    out = np.empty((len(x), coords.k), np.float32)
    with torch.no_grad():
        for lo in range(0, len(x), chunk):
            out[lo : lo + chunk] = coords.encode(torch.as_tensor(x[lo : lo + chunk], dtype=torch.float64))
    return out


def variance_explained(
    coords: Coordinates, x: np.ndarray, mean: np.ndarray, std: np.ndarray, chunk: int = 16_384
) -> float:
    """Share of the z-scored variance of states ``x`` that ``decode(encode(x))`` keeps: ``1 - FVU``
    with ``z = (x - mean) / std`` (for PCA and ICA, the explained-variance ratio of the first k PCs);
    computed in chunks of states."""
    z_mean = ((np.asarray(x, np.float64).mean(0)) - mean) / std
    err = total = 0.0
    with torch.no_grad():
        for lo in range(0, len(x), chunk):
            part = np.asarray(x[lo : lo + chunk], np.float64)
            back = coords.decode(coords.encode(torch.as_tensor(part))).numpy()
            z = (part - mean) / std
            err += float(((z - (back - mean) / std) ** 2).sum())
            total += float(((z - z_mean) ** 2).sum())
    return 1.0 - err / total if total > 0 else float("nan")
