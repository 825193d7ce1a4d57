"""Reading a foreign checkpoint file safely, before anyone knows what is in it.

Two containers cover the field: PyTorch's ``torch.save`` (a pickle, in a zip or the legacy
layout) and Flax's ``to_bytes`` (a msgpack document). A pickle can run arbitrary code when it is
loaded, so PyTorch files are read only with ``torch.load(weights_only=True)``, which admits
tensors, plain containers, numbers and strings and refuses everything else; a file that needs
more is refused with the class it asked for. The one extension is NumPy's *numeric* scalars
(``numpy.core.multiarray.scalar`` with a bool/int/float/complex dtype): training statistics hold
them (torchbeast's ``stats``), and building one from its dtype and bytes runs no code. msgpack
carries data only.

A directory stands for the checkpoint inside it: a train-procgen-pytorch log directory holds one
``model_<steps>.pth`` per save (the latest is taken), a torchbeast run one ``model.tar``.
"""

from __future__ import annotations

import hashlib
import pickle
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from proclab.errors import ProclabError
from proclab.models.importers.flax_msgpack import read_flax_msgpack

SUFFIXES = (".pth", ".pt", ".tar", ".ckpt", ".cleanrl_model", ".msgpack", ".bin")
STEPS_IN_NAME = re.compile(r"^model_(\d+)\.pth?$")
_NON_NUMERIC = ("Object", "Str", "Bytes", "Void", "DateTime", "TimeDelta", "String")
NUMPY_SCALARS = [
    np.core.multiarray.scalar,
    np.dtype,
    *(
        getattr(np.dtypes, n)
        for n in dir(np.dtypes)
        if n.endswith("DType") and not any(bad in n for bad in _NON_NUMERIC)
    ),
]
_GLOBAL = re.compile(r"(?:Unsupported global|GLOBAL)[:\s]+(?:GLOBAL\s+)?([\w.]+)")


@dataclass(frozen=True)
class SourceFile:
    """A checkpoint file read into plain data: nested dicts/lists of tensors, numbers and strings."""

    path: Path
    sha256: str
    size: int
    container: str  # "torch" or "msgpack"
    payload: Any


def find_source(path: str | Path) -> Path:
    """The checkpoint file ``path`` names (itself, or the one its directory holds)."""
    path = Path(path)
    if not path.exists():
        raise ProclabError(f"checkpoint {str(path)!r} does not exist")
    if path.is_file():
        return path
    if not path.is_dir():
        raise ProclabError(f"{str(path)!r} is neither a file nor a directory")
    numbered = [
        (int(m.group(1)), p) for p in path.iterdir() if (m := STEPS_IN_NAME.match(p.name)) and p.is_file()
    ]
    if numbered:
        return max(numbered)[1]
    found = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(SUFFIXES))
    if len(found) == 1:
        return found[0]
    if not found:
        raise ProclabError(
            f"directory {str(path)!r} holds no checkpoint (no model_<steps>.pth nor a file ending in "
            f"{', '.join(SUFFIXES)})"
        )
    names = ", ".join(p.name for p in found[:6])
    raise ProclabError(f"directory {str(path)!r} holds several checkpoints ({names}); name one of them")


def read_source(path: str | Path) -> SourceFile:
    """Find, hash and decode a checkpoint; every problem is one :class:`ProclabError` line."""
    path = find_source(path)
    data = path.read_bytes()
    if not data:
        raise ProclabError(f"checkpoint {str(path)!r} is empty (0 bytes)")
    sha = hashlib.sha256(data).hexdigest()
    if _looks_like_torch(data):
        return SourceFile(path, sha, len(data), "torch", _torch_load(path))
    return SourceFile(path, sha, len(data), "msgpack", read_flax_msgpack(data, path))


def _looks_like_torch(data: bytes) -> bool:
    """A zip archive (``torch.save`` since 1.6) or a pickle stream (the legacy layout)."""
    return data[:4] == b"PK\x03\x04" or data[:1] == b"\x80"


def _torch_load(path: Path) -> Any:
    try:
        with torch.serialization.safe_globals(NUMPY_SCALARS):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        found = _GLOBAL.search(str(err))
        what = f"a Python object of class {found.group(1)}" if found else "Python objects besides tensors"
        raise ProclabError(
            f"checkpoint {str(path)!r} needs {what} to load; proclab reads only tensors, dicts, lists, "
            "numbers and strings (torch.load(weights_only=True)) and never unpickles objects. Re-save "
            "its state dict (torch.save(model.state_dict(), ...)) and import that"
        ) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError, OSError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ProclabError(f"checkpoint {str(path)!r} is truncated or corrupt: {first}") from None
