"""The coordinate systems of an analysis folder, by name: what the sweep edits and the atlas describes.

``ica`` and ``pca`` come from the folder's basis (``analyze hidden``), ``nmf`` from the NMF that
``analyze hidden`` saves beside it, ``sparse`` from the sparse dictionary that ``analyze atlas
--basis sparse`` fits, and ``units`` are the state's own units z-scored as the basis z-scores them
(:mod:`proclab.interpret.bases.units`: the reference the fitted systems are compared with). Each is a :class:`~proclab.interpret.bases.coordinates.Coordinates` (encode,
decode, state directions), so every command that edits or describes directions takes any of them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.bases.coordinates import Coordinates, LinearCoordinates
from proclab.interpret.bases.nmf import FILE as NMF
from proclab.interpret.bases.nmf import NmfCoordinates
from proclab.interpret.bases.sparse_dictionary import FILE as DICTIONARY
from proclab.interpret.bases.sparse_dictionary import SparseDictionary
from proclab.interpret.bases.units import UnitCoordinates
from proclab.interpret.workspace.folder import Workspace

SYSTEMS = {
    "ica": "the folder's independent components (analyze hidden)",
    "pca": "its first k principal components (analyze hidden)",
    "nmf": "its NMF components, non-negative codes (analyze hidden)",
    "sparse": "an overcomplete top-k sparse dictionary (fitted by analyze atlas --basis sparse)",
    "units": "the state's own units, z-scored as the folder's basis z-scores them (nothing fitted)",
}


def check_system(name: str) -> None:
    if name not in SYSTEMS:
        raise unknown_choice("--basis", name, SYSTEMS)


def suffix(name: str) -> str:
    """Folder-name suffix of a system's outputs: ``sweep`` for ica (the default), ``sweep-sparse``, ..."""
    return "" if name == "ica" else f"-{name}"


def system_file(ws: Workspace, name: str) -> Path:
    """The file system ``name`` of folder ``ws`` is read from (the units' z-scoring is the basis's)."""
    check_system(name)
    return {"nmf": ws.path / NMF, "sparse": ws.path / DICTIONARY}.get(name, ws.basis_path)


def file_digest(path: Path) -> str:
    """SHA-256 of a file: which fit of a basis a sweep was run on (the atlas refuses a stale sweep)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def open_coordinates(ws: Workspace, name: str) -> Coordinates:
    """System ``name`` of folder ``ws``; a one-line error says which command makes a missing one."""
    check_system(name)
    if name in ("ica", "pca"):
        return LinearCoordinates(ws.basis(), name)
    if name == "units":
        return UnitCoordinates(ws.basis())
    if name == "nmf":
        if not (ws.path / NMF).is_file():
            raise ProclabError(
                f"analysis folder {str(ws.path)!r} has no {NMF}; rerun `proclab analyze hidden` (it saves the NMF)"
            )
        return NmfCoordinates.load(ws.path / NMF, ws.basis())
    if not (ws.path / DICTIONARY).is_file():
        raise ProclabError(
            f"analysis folder {str(ws.path)!r} has no sparse dictionary yet; fit it with "
            "`proclab analyze atlas --basis sparse`"
        )
    return SparseDictionary.load(ws.path / DICTIONARY)


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
