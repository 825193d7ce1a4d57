"""The hidden-state basis every analysis shares: z-score -> PCA -> FastICA.

A state ``h`` (``D`` floats) is described in three coordinate systems:

* **z-scored**: ``z = (h - mu) / sigma`` with the real data's per-unit mean and std (a unit
  that never varies keeps ``sigma = 1``, so it maps to a constant instead of NaN);
* **PCA**: ``p = (z - m) C^T`` with the orthonormal components ``C`` (``D x D``, all of them,
  so the map is exactly invertible) and ``m`` the PCA mean of ``z`` (zero when the basis is
  fitted on the data that gave ``mu``, kept for exactness). ``lambda_j`` are the PC variances;
* **ICA**: ``s = (p_{:k} / sqrt(lambda_{:k})) W^T``: FastICA (``W`` the unmixing, ``A = W^-1``
  the mixing matrix) on the first ``k`` *standardised* PCs, which are already white, so FastICA
  runs without its own whitening (``whiten=False``), as the interpreting-rl-behavior analyses did.

Both coordinate maps are affine, ``coords = (h - o) P`` with the origin ``o = mu + sigma * m``,
and each kind has ``k`` state-space **directions** ``d`` (rows of a ``k x D`` matrix) with
``d P = I``: a state increment ``delta = sum_m c_m d_m + r`` has coordinates ``c = delta P``
and a residual ``r`` outside the directions' span. The gradient of a function ``f`` of the
state with respect to the coordinates (moving along the directions) is ``df/dc = (df/dh) d^T``;
for ICA this is ``diag(sigma) C_k^T diag(sqrt(lambda_k)) A`` applied to ``df/dh``, the seed's
``Q`` matrix. Every map takes numpy or torch arrays and returns the same kind (torch stays
differentiable), so gradients can flow through a basis in saliency and interventions.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from proclab.errors import ProclabError, unknown_choice
from proclab.io.files import load_npz, save_npz

Kind = Literal["pca", "ica"]
KINDS = ("pca", "ica")
CONTRASTS = ("logcosh", "exp", "cube")
"""FastICA's contrast functions (scikit-learn's)."""
FORMAT = "proclab-basis"


@dataclass(frozen=True)
class BasisConfig:
    """How the basis is fitted (defaults: the interpreting-rl-behavior analyses)."""

    n_ics: int = 16
    """k: FastICA on the first k standardised PCs."""
    seed: int = 0
    """FastICA's random initial unmixing matrix."""
    max_iter: int = 8000
    """FastICA iterations at most."""
    tol: float = 0.02
    """FastICA stops when the unmixing matrix changes less than this."""
    fun: str = "logcosh"
    """FastICA's contrast function (:data:`CONTRASTS`)."""


class Basis:
    """z-score (real data mu, sigma) -> PCA (all components) -> FastICA on the first k standardised PCs."""

    def __init__(
        self,
        *,
        mean,
        std,
        pca_mean,
        components,
        pc_var,
        unmixing,
        config: BasisConfig,
        provenance: dict,
        fit_info: dict,
    ):
        self.mean = np.asarray(mean, np.float64)
        self.std = np.asarray(std, np.float64)
        self.pca_mean = np.asarray(pca_mean, np.float64)
        self.components = np.asarray(components, np.float64)  # (D, D), rows are the PCs
        self.pc_var = np.asarray(pc_var, np.float64)  # (D,)
        self.unmixing = np.asarray(unmixing, np.float64)  # (k, k): W
        self.mixing = np.linalg.inv(self.unmixing)  # A
        self.config = config
        self.provenance = provenance
        self.fit_info = fit_info
        self.n_ics = self.unmixing.shape[0]
        k = self.n_ics
        pc_std = np.sqrt(self.pc_var[:k])
        self.origin = self.mean + self.std * self.pca_mean
        # coords = (h - origin) @ proj:<kind>; dirs:<kind> @ proj:<kind> = I ("pcs": all D components)
        self._np = {
            "origin": self.origin,
            "proj:pcs": self.components.T / self.std[:, None],
            "proj:pca": self.components[:k].T / self.std[:, None],
            "proj:ica": (self.components[:k].T / self.std[:, None]) / pc_std @ self.unmixing.T,
            "dirs:pcs": self.components * self.std,
            "dirs:pca": self.components[:k] * self.std,
            "dirs:ica": (self.mixing.T * pc_std) @ self.components[:k] * self.std,
        }
        self._torch_cache: dict[tuple, torch.Tensor] = {}

    @property
    def dim(self) -> int:
        return self.mean.shape[0]

    @property
    def pc_std(self) -> np.ndarray:
        return np.sqrt(self.pc_var)

    @property
    def explained_variance_ratio(self) -> np.ndarray:
        return self.pc_var / self.pc_var.sum()

    # -- fitting ---------------------------------------------------------------------------------
    @classmethod
    def fit(cls, x: np.ndarray, config: BasisConfig, provenance: dict) -> Basis:
        """Fit on ``x`` (``N x D``, the real inlier states); ``provenance`` is saved with it."""
        # lazy: scikit-learn is slow to import, only the fits need it
        from sklearn.decomposition import PCA, FastICA

        x = np.asarray(x, np.float64)
        n, d = x.shape
        if n <= d:
            raise ProclabError(f"a basis of {d}-d states needs more than {d} points; got {n}")
        if not 1 <= config.n_ics <= d:
            raise ProclabError(f"n_ics {config.n_ics} is not in 1..{d} (the state width)")
        mean = x.mean(0)
        std = x.std(0)
        std[std <= 1e-12 * max(1.0, float(np.abs(mean).max(initial=0.0)))] = 1.0
        pca = PCA(n_components=d, svd_solver="full").fit((x - mean) / std)
        live = int(np.sum(pca.explained_variance_ > 1e-10 * pca.explained_variance_[0]))
        if config.n_ics > live:
            raise ProclabError(
                f"n_ics {config.n_ics} is more than the {live} principal components that vary; "
                f"choose n_ics <= {live}"
            )
        k = config.n_ics
        u = pca.transform((x - mean) / std)[:, :k] / np.sqrt(pca.explained_variance_[:k])
        ica = FastICA(
            whiten=False,
            fun=config.fun,
            max_iter=config.max_iter,
            tol=config.tol,
            random_state=config.seed,
        ).fit(u)
        info = {
            "ica_iterations": int(ica.n_iter_),
            "ica_converged": bool(ica.n_iter_ < config.max_iter),
            "points": n,
        }
        return cls(
            mean=mean,
            std=std,
            pca_mean=pca.mean_,
            components=pca.components_,
            pc_var=pca.explained_variance_,
            unmixing=ica.components_,
            config=config,
            provenance=dict(provenance),
            fit_info=info,
        )

    # -- maps ------------------------------------------------------------------------------------
    def _mat(self, name: str, like):
        """Matrix ``name`` as the same kind of array as ``like`` (torch: same dtype and device)."""
        m = self._np[name]
        if not isinstance(like, torch.Tensor):
            return m
        key = (name, like.dtype, like.device)
        if key not in self._torch_cache:  # a normal tensor even when first asked inside inference mode,
            with torch.inference_mode(False):  # so later autograd (saliency, gradients) may use it
                self._torch_cache[key] = torch.as_tensor(m, dtype=like.dtype, device=like.device)
        return self._torch_cache[key]

    @staticmethod
    def _check_kind(kind: str) -> None:
        if kind not in KINDS:
            raise unknown_choice("direction kind", kind, KINDS)

    def to_pcs(self, h):
        """``(N, D)`` states -> ``(N, D)`` PC coordinates (all components)."""
        return (h - self._mat("origin", h)) @ self._mat("proj:pcs", h)

    def from_pcs(self, c):
        """Inverse of :meth:`to_pcs` (exact: all components are kept)."""
        return c @ self._mat("dirs:pcs", c) + self._mat("origin", c)

    def to_ics(self, h):
        """``(N, D)`` states -> ``(N, k)`` IC coordinates."""
        return (h - self._mat("origin", h)) @ self._mat("proj:ica", h)

    def from_ics(self, s, residual_pcs=None):
        """``(N, k)`` IC coordinates -> states; ``residual_pcs`` ``(N, D - k)`` are the remaining PC
        coordinates (default zero: the data mean along them). ``from_ics(to_ics(h), to_pcs(h)[:, k:])``
        gives back ``h``."""
        h = s @ self._mat("dirs:ica", s) + self._mat("origin", s)
        if residual_pcs is not None:
            h = h + residual_pcs @ self._mat("dirs:pcs", s)[self.n_ics :]
        return h

    def to_coords(self, h, kind: Kind):
        """``(N, D)`` states -> ``(N, k)`` coordinates of the first k PCs or the k ICs."""
        self._check_kind(kind)
        return (h - self._mat("origin", h)) @ self._mat("proj:" + kind, h)

    def directions(self, kind: Kind) -> np.ndarray:
        """``(k, D)``: the state-space direction ``d_m`` along which coordinate ``m`` grows by one."""
        self._check_kind(kind)
        return self._np["dirs:" + kind].copy()

    def along(self, c, kind: Kind):
        """``(N, k)`` coordinate changes -> the ``(N, D)`` state change ``c @ directions(kind)`` that
        makes them (the inverse of :meth:`increment_coords` on the directions' span)."""
        self._check_kind(kind)
        return c @ self._mat("dirs:" + kind, c)

    def increment_coords(self, delta, kind: Kind):
        """Coordinates ``c`` (``(N, k)``) of a state increment: ``delta = c @ directions(kind) + r``
        with ``r`` outside the directions' span (no mean is subtracted: an increment has no origin)."""
        self._check_kind(kind)
        return delta @ self._mat("proj:" + kind, delta)

    def project_gradient(self, grad, kind: Kind):
        """``df/dh`` (``(N, D)``) -> ``df/dc`` (``(N, k)``), moving the state along :meth:`directions`."""
        self._check_kind(kind)
        return grad @ self._mat("dirs:" + kind, grad).T

    # -- saving ----------------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """One ``.npz`` of plain arrays; config, provenance and fit facts as a JSON string inside."""
        path = Path(path)
        meta = {
            "format": FORMAT,
            "config": asdict(self.config),
            "provenance": self.provenance,
            "fit_info": self.fit_info,
        }
        save_npz(
            path,
            "basis",
            mean=self.mean,
            std=self.std,
            pca_mean=self.pca_mean,
            components=self.components,
            pc_var=self.pc_var,
            unmixing=self.unmixing,
            meta=np.array(json.dumps(meta, default=str)),
        )

    @classmethod
    def load(cls, path: Path) -> Basis:
        path = Path(path)
        arrays: dict[str, Any] = load_npz(path, "basis")
        try:
            meta = json.loads(str(arrays.pop("meta")))
        except (ValueError, KeyError) as err:
            raise ProclabError(f"basis {str(path)!r} is corrupt: no readable metadata ({err})") from None
        if meta.get("format") != FORMAT:
            raise ProclabError(f"{str(path)!r} is not a saved basis (format {meta.get('format')!r})")
        return cls(
            **arrays,
            config=BasisConfig(**meta["config"]),
            provenance=meta["provenance"],
            fit_info=meta["fit_info"],
        )
