"""The state's own units as a coordinate system: the reference every fitted basis is compared with.

The seed's write-up says single units of the hidden state are hard to interpret and IC directions
are better. To measure that, the units must be described and edited exactly as the ICs are: the
atlas's cards and the sweep's arms take any :class:`~proclab.interpret.bases.coordinates.Coordinates`,
so the units are one more system (``--basis units``, :mod:`proclab.interpret.workspace.systems`).

Coordinate ``m`` is unit ``m`` of the edited state in the z-scored space the folder's basis uses,
``c_m = (h_m - mu_m) / sigma_m`` (the basis's per-unit mean and std over the recorded states; a unit
that never varies keeps ``sigma = 1``), so a unit's coordinate has about the spread of an IC's and
the arms (mean, percentiles, a recorded value) are placed in the unit's own recorded distribution,
as for every system. Its state direction is ``sigma_m e_m``; nothing is fitted, so there is nothing
to refit (stability is not measured) and the code explains all of the state's variance.
"""

from __future__ import annotations

import numpy as np
from torch import Tensor

from proclab.interpret.bases.coordinates import Coordinates, tensors_like
from proclab.interpret.bases.pca_ica import Basis


class UnitCoordinates(Coordinates):
    """The ``D`` units of a state, z-scored with ``basis``'s mean and std (see the module docstring)."""

    name, label, nonnegative = "units", "unit", False

    def __init__(self, basis: Basis):
        self.mean = np.asarray(basis.mean, np.float64)
        self.std = np.asarray(basis.std, np.float64)
        self.k = self.dim = len(self.mean)
        self._cache: dict = {}

    def _z(self, like: Tensor) -> dict[str, Tensor]:
        return tensors_like(self._cache, {"mean": self.mean, "std": self.std}, like)

    def encode(self, h: Tensor) -> Tensor:
        z = self._z(h)
        return (h - z["mean"]) / z["std"]

    def decode(self, c: Tensor) -> Tensor:
        z = self._z(c)
        return c * z["std"] + z["mean"]

    def write(self, h: Tensor, c: Tensor, c_new: Tensor) -> Tensor:
        """Only the changed units move: ``h + (c_new - c) sigma`` (exactly ``h`` where they are equal)."""
        return h + (c_new - c) * self._z(h)["std"]

    def directions(self) -> np.ndarray:
        return np.diag(self.std)
