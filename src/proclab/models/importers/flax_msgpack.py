"""Flax's ``flax.serialization.to_bytes`` documents, read with ``msgpack`` alone (no JAX).

The format, as Flax writes it: the pytree's *state dict* (dicts stay dicts; lists and tuples
become dicts keyed ``"0"``, ``"1"``, ...) packed with msgpack, where every array is a msgpack
extension object. Extension code 1 is an ndarray and code 3 a NumPy scalar, both with the
payload ``msgpack([shape, dtype name, C-order bytes])``; code 2 is a Python complex
``msgpack([real, imag])``. Arrays larger than Flax's chunk size are split into a dict
``{"__msgpack_chunked_array__": True, "shape": ..., "chunks": {"0": ..., ...}}``. ``bfloat16``
(a JAX dtype NumPy lacks) is widened to float32 exactly, by shifting its 16 bits up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from proclab.errors import ProclabError

NDARRAY, NATIVE_COMPLEX, NPSCALAR = 1, 2, 3
CHUNKED = "__msgpack_chunked_array__"


def _array(payload: bytes) -> np.ndarray:
    shape, dtype, buffer = msgpack.unpackb(payload, raw=True)
    name = dtype.decode() if isinstance(dtype, bytes) else str(dtype)
    if name == "bfloat16":
        bits = np.frombuffer(buffer, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    return np.frombuffer(buffer, dtype=np.dtype(name)).reshape(shape).copy()


def _ext_hook(code: int, payload: bytes) -> Any:
    if code in (NDARRAY, NPSCALAR):
        return _array(payload)
    if code == NATIVE_COMPLEX:
        real, imag = msgpack.unpackb(payload)
        return complex(real, imag)
    return msgpack.ExtType(code, payload)


def _unchunk(tree: Any) -> Any:
    if isinstance(tree, dict):
        if tree.get(CHUNKED):
            shape = tuple(tree["shape"][str(i)] for i in range(len(tree["shape"])))
            chunks = [tree["chunks"][str(i)] for i in range(len(tree["chunks"]))]
            return np.concatenate(chunks).reshape(shape)
        return {k: _unchunk(v) for k, v in tree.items()}
    return tree


def read_flax_msgpack(data: bytes, path: Path) -> Any:
    """The document's state dict: nested dicts of NumPy arrays and plain values."""
    try:
        tree = msgpack.unpackb(data, ext_hook=_ext_hook, raw=False, strict_map_key=False)
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, TypeError) as err:
        raise ProclabError(
            f"{str(path)!r} is neither a PyTorch checkpoint nor a Flax msgpack document ({err})"
        ) from None
    if not isinstance(tree, dict):
        raise ProclabError(
            f"{str(path)!r} holds a msgpack {type(tree).__name__}, not the dict of a Flax checkpoint"
        )
    return _unchunk(tree)
