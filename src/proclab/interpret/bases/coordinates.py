"""The coordinates an intervention edits: a basis seen as an encode/decode pair of a state tensor.

An edit reads a state's coordinates ``c = encode(h)`` (``(N, D)`` -> ``(N, k)``), changes some of
them to ``c'`` and writes the change back, ``h' = h + decode(c') - decode(c)``. What the
coordinates do not describe (the directions a PCA/ICA leaves out, a dictionary's reconstruction
error) is kept as it was, and an edit that changes nothing gives back ``h`` bit for bit: both
decodes are the same computation, so their difference is exactly zero. That is the whole
contract a basis needs for the sweep's arms (:func:`hold`) and swaps (:func:`swap`): a linear basis (PCA, ICA:
:class:`LinearCoordinates`) writes back ``(c' - c) @ directions``, an overcomplete sparse
dictionary only brings its own ``encode`` and ``decode``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from proclab.interpret.bases.pca_ica import Basis, Kind


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

    def encode(self, h: Tensor) -> Tensor:
        return self.basis.to_coords(h, self.kind)

    def decode(self, c: Tensor) -> Tensor:
        return self.basis.along(c, self.kind) + torch.as_tensor(
            self.basis.origin, dtype=c.dtype, device=c.device
        )

    def write(self, h: Tensor, c: Tensor, c_new: Tensor) -> Tensor:
        """Linear: the origin cancels, ``h + (c_new - c) @ directions`` (exactly ``h`` when equal)."""
        return h + self.basis.along(c_new - c, self.kind)


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


def hold(coords: Coordinates, h: Tensor, dims: Tensor, values: Tensor) -> Tensor:
    """Per row ``r`` of ``h`` (``(N, dim)``): coordinate ``dims[r]`` set to ``values[r]``, the others
    and the residual kept; rows with ``dims[r] < 0`` are returned untouched."""
    c = coords.encode(h)
    edited = dims >= 0
    rows = edited.nonzero().squeeze(1)
    c_new = c.clone()
    c_new[rows, dims[rows]] = values[rows].to(c.dtype)
    return torch.where(edited[:, None], coords.write(h, c, c_new), h)


def swap(coords: Coordinates, h: Tensor, first: Tensor, second: Tensor) -> Tensor:
    """Per row ``r`` of ``h`` (``(N, dim)``): coordinates ``first[r]`` and ``second[r]`` exchanged, the
    others and the residual kept; rows with ``first[r] < 0`` are returned untouched.

    **The state, not its increments.** ``analyze intervene --exchange I:J`` exchanges the coordinates of
    each step's *increment* ``h_t - h_{t-1}``: the state then adds J's changes along I from the start
    state's coordinates on, so coordinate I ends near ``c_I(h_0) + c_J(h_t) - c_J(h_0)``, as far off the
    data as the all-zero start state puts the two coordinates apart (the reason the sweep's collapse arm
    left the data for 15 of the seed agent's 16 ICs). "Swapping a buzzsaw direction with a box direction"
    says that what the agent reads along one direction is what it computed along the other, so this edit
    exchanges the coordinates of the state itself: ``c'_I = c_J(h)``, ``c'_J = c_I(h)``, values each
    coordinate takes in the other's recorded states. Held at every step at the core's per-step hook
    (:class:`~proclab.interpret.sweep.timed.TimedAgent`), the swapped state is what the heads read *and*
    what the next step starts from: what the core recomputes from each frame is fully exchanged, while
    what it carries unchanged along I and J comes back exchanged at the next step and is exchanged again
    (the swap is its own inverse). A swap's effect is that of both, and is read with this in mind."""
    c = coords.encode(h)
    edited = first >= 0
    rows = edited.nonzero().squeeze(1)
    a, b = first[rows], second[rows]
    c_new = c.clone()
    c_new[rows, a], c_new[rows, b] = c[rows, b], c[rows, a]
    return torch.where(edited[:, None], coords.write(h, c, c_new), h)
