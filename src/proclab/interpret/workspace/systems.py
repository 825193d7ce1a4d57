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
