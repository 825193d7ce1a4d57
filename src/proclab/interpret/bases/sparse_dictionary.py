"""An overcomplete sparse dictionary of the hidden state: a small top-k sparse autoencoder.

A state ``h`` (``D`` floats) is z-scored with the training states' per-unit mean and std,
``z = (h - mu) / sigma``, and described by ``n`` atoms (``n = expansion x D``, 4x by default):

* **encode** ``c = topk(relu(W_e (z - b) + e))``: the ``k`` largest non-negative pre-activations
  kept, every other atom exactly zero. A state is always made of at most ``k`` atoms, so an
  atom's code is zero whenever it is not part of the state (no L1 shrinkage of the active ones);
* **decode** ``z' = c W_d + b`` with unit-norm atoms (rows of ``W_d``), mapped back to
  ``h' = z' sigma + mu``. The state direction of atom ``m`` is ``W_d[m] * sigma``.

Why a top-k autoencoder (Gao et al. 2024, "Scaling and evaluating sparse autoencoders") and not
scikit-learn's ``MiniBatchDictionaryLearning``: an intervention encodes the state at every step
of every played episode (:mod:`proclab.interpret.interventions.batched_play`), and saliency differentiates the
code w.r.t. the frames. Here encoding is one matrix product and a top-k, in torch, batched and
differentiable; scikit-learn's codes come from a per-sample OMP/LARS/lasso solve in numpy (no
gradient, and orders of magnitude slower per state; ``benchmarks/atlas_build.py`` measures both).
Sparsity is set exactly by ``k`` instead of by an L1 weight traded against reconstruction.

Training: Adam on the mean squared error of ``z``, atoms renormalised after every step; the
encoder starts as the decoder's transpose (Gao et al.'s tied initialisation), ``b`` at the data
mean. Atoms that have not fired for ``dead_after`` states get the auxiliary loss of Gao et al.
(their ``k_aux`` largest pre-activations must reconstruct what the live atoms leave), which brings
most of them back. What the fit reports: the share of variance it explains (``1 - FVU`` in
z-scored units, comparable with the PCs' explained-variance ratio), **dead** atoms (never active
on the fitted states) and **dense** atoms (active on more than ``dense_share`` of them).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from proclab.errors import ProclabError
from proclab.interpret.bases.coordinates import Coordinates, tensors_like

FORMAT = "proclab-sparse-dictionary"
FILE = "dictionary.npz"


@dataclass(frozen=True)
class DictionaryConfig:
    """How the sparse dictionary is fitted."""

    expansion: int = 4
    """Atoms per state unit: n = expansion x D (overcomplete for expansion > 1)."""
    k: int = 8
    """Atoms active per state (top-k)."""
    steps: int = 4000
    """Adam steps."""
    batch: int = 1024
    """States per step (drawn with replacement from the fitted states)."""
    lr: float = 1e-3
    """Adam learning rate."""
    dead_after: int = 100_000
    """States without firing after which an atom counts as dead during training (auxiliary loss)."""
    aux_k: int = 32
    """Dead atoms used by the auxiliary loss per state."""
    aux_weight: float = 1 / 32
    """Weight of the auxiliary loss (Gao et al.'s 1/32)."""
    dense_share: float = 0.1
    """An atom active on more than this share of the fitted states is reported as dense."""
    seed: int = 0
    """Seed of the initial atoms and the batches."""

    def check(self, dim: int) -> None:
        for name in ("expansion", "k", "steps", "batch", "aux_k"):
            if getattr(self, name) < 1:
                raise ProclabError(f"sparse dictionary: {name} must be >= 1, got {getattr(self, name)}")
        if self.k > self.expansion * dim:
            raise ProclabError(
                f"sparse dictionary: k {self.k} is more than its {self.expansion * dim} atoms "
                f"({self.expansion} x the state width {dim})"
            )


class SparseDictionary(Coordinates):
    """A fitted top-k dictionary (see the module docstring); its codes are the ``sparse`` coordinates."""

    name, label, nonnegative = "sparse", "atom", True

    def __init__(self, *, mean, std, w_enc, b_enc, w_dec, b_pre, config: DictionaryConfig, fit_info: dict):
        self.mean, self.std = np.asarray(mean, np.float64), np.asarray(std, np.float64)
        self.w_enc = np.asarray(w_enc, np.float64)  # (D, n)
        self.b_enc = np.asarray(b_enc, np.float64)  # (n,)
        self.w_dec = np.asarray(w_dec, np.float64)  # (n, D), unit rows
        self.b_pre = np.asarray(b_pre, np.float64)  # (D,)
        self.config, self.fit_info = config, fit_info
        self.k, self.dim = self.w_dec.shape
        self._cache: dict[tuple, dict[str, Tensor]] = {}

    def _t(self, like: Tensor) -> dict[str, Tensor]:
        names = ("mean", "std", "w_enc", "b_enc", "w_dec", "b_pre")
        return tensors_like(self._cache, {n: getattr(self, n) for n in names}, like)

    def encode(self, h: Tensor) -> Tensor:
        p = self._t(h)
        return topk_codes(((h - p["mean"]) / p["std"] - p["b_pre"]) @ p["w_enc"] + p["b_enc"], self.config.k)

    def decode(self, c: Tensor) -> Tensor:
        p = self._t(c)
        return (c @ p["w_dec"] + p["b_pre"]) * p["std"] + p["mean"]

    def write(self, h: Tensor, c: Tensor, c_new: Tensor) -> Tensor:
        """Linear decoder: ``h + ((c_new - c) W_d) sigma``, exactly ``h`` when the codes are equal."""
        p = self._t(h)
        return h + ((c_new - c) @ p["w_dec"]) * p["std"]

    def directions(self) -> np.ndarray:
        return self.w_dec * self.std

    # -- fitting ---------------------------------------------------------------------------------
    @classmethod
    def fit(cls, x: np.ndarray, config: DictionaryConfig, progress=None) -> SparseDictionary:
        """Fit on the states ``x`` (``N x D``); ``progress(done, total)`` is called as steps finish."""
        x = np.asarray(x, np.float64)
        n, d = x.shape
        config.check(d)
        if n < 2:
            raise ProclabError(f"a sparse dictionary needs at least 2 states; got {n}")
        mean, std = x.mean(0), x.std(0)
        std[std <= 1e-12] = 1.0
        z = torch.as_tensor((x - mean) / std, dtype=torch.float32)
        model = _TopK(d, config.expansion * d, config, z.mean(0))
        model.train_on(z, progress)
        with torch.no_grad():
            params = {k: v.detach().double().numpy() for k, v in model.state_dict().items()}
        made = cls(
            mean=mean,
            std=std,
            w_enc=params["w_enc"],
            b_enc=params["b_enc"],
            w_dec=params["w_dec"],
            b_pre=params["b_pre"],
            config=config,
            fit_info={},
        )
        made.fit_info = made.quality(x) | {"points": n, "final_loss": model.last_loss}
        return made

    def quality(self, x: np.ndarray, chunk: int = 65_536) -> dict:
        """On states ``x``: the share of z-scored variance explained, and dead / dense atoms."""
        x = np.asarray(x, np.float64)
        z = (x - self.mean) / self.std
        err, fired = 0.0, np.zeros(self.k, np.int64)
        for lo in range(0, len(x), chunk):
            h = torch.as_tensor(x[lo : lo + chunk])
            c = self.encode(h)
            zr = (self.decode(c).numpy() - self.mean) / self.std
            err += float(((z[lo : lo + chunk] - zr) ** 2).sum())
            fired += (c > 0).sum(0).numpy()
        total = float(((z - z.mean(0)) ** 2).sum())
        share = fired / len(x)
        return {
            "variance_explained": 1.0 - err / total if total > 0 else float("nan"),
            "reconstruction_mse": err / z.size,
            "atoms": self.k,
            "dead": int((fired == 0).sum()),
            "dense": int((share > self.config.dense_share).sum()),
            "active_share": share.tolist(),
        }

    # -- saving ----------------------------------------------------------------------------------
    def save(self, path: Path) -> Path:
        path = Path(path)
        meta = {"format": FORMAT, "config": asdict(self.config), "fit_info": self.fit_info}
        tmp = path.with_name(f".{path.name}.tmp.npz")
        np.savez(
            tmp,
            mean=self.mean,
            std=self.std,
            w_enc=self.w_enc,
            b_enc=self.b_enc,
            w_dec=self.w_dec,
            b_pre=self.b_pre,
            meta=np.array(json.dumps(meta)),
        )
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: Path) -> SparseDictionary:
        try:
            with np.load(path, allow_pickle=False) as f:
                arrays = {k: f[k] for k in f.files}
            meta = json.loads(str(arrays.pop("meta")))
        except (OSError, ValueError, KeyError) as err:
            raise ProclabError(f"{str(path)!r} is not a saved sparse dictionary ({err})") from None
        if meta.get("format") != FORMAT:
            raise ProclabError(f"{str(path)!r} is not a saved sparse dictionary")
        return cls(**arrays, config=DictionaryConfig(**meta["config"]), fit_info=meta["fit_info"])


def topk_codes(pre: Tensor, k: int) -> Tensor:
    """Per row, the ``k`` largest of ``relu(pre)`` kept and every other entry zero."""
    values, index = torch.relu(pre).topk(k, dim=-1)
    return torch.zeros_like(pre).scatter(-1, index, values)


class _TopK(torch.nn.Module):
    """The trainable autoencoder in z-scored units (float32)."""

    def __init__(self, d: int, n: int, config: DictionaryConfig, data_mean: Tensor):
        super().__init__()
        g = torch.Generator().manual_seed(config.seed)
        w_dec = torch.randn(n, d, generator=g)
        w_dec /= w_dec.norm(dim=1, keepdim=True)
        self.w_dec = torch.nn.Parameter(w_dec)
        self.w_enc = torch.nn.Parameter(w_dec.T.clone())
        self.b_enc = torch.nn.Parameter(torch.zeros(n))
        self.b_pre = torch.nn.Parameter(data_mean.clone())
        self.config, self.generator, self.last_loss = config, g, float("nan")

    def train_on(self, z: Tensor, progress) -> None:
        cfg = self.config
        opt = torch.optim.Adam(self.parameters(), lr=cfg.lr)
        idle = torch.zeros(self.w_dec.shape[0])  # states since each atom last fired
        for step in range(cfg.steps):
            batch = z[torch.randint(0, len(z), (cfg.batch,), generator=self.generator)]
            pre = (batch - self.b_pre) @ self.w_enc + self.b_enc
            codes = topk_codes(pre, cfg.k)
            residual = batch - (codes @ self.w_dec + self.b_pre)
            loss = residual.pow(2).sum(1).mean()
            dead = idle >= cfg.dead_after
            if dead.any():
                aux = topk_codes(pre.masked_fill(~dead, float("-inf")), min(cfg.aux_k, int(dead.sum())))
                aux_loss = (residual.detach() - aux @ self.w_dec).pow(2).sum(1).mean()
                loss = loss + cfg.aux_weight * aux_loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            with torch.no_grad():
                self.w_dec /= self.w_dec.norm(dim=1, keepdim=True).clamp(min=1e-12)
                fired = (codes > 0).any(0)
                idle = torch.where(fired, torch.zeros_like(idle), idle + cfg.batch)
            self.last_loss = float(loss.detach())
            if progress is not None and (step + 1) % 100 == 0:
                progress(step + 1, cfg.steps)
