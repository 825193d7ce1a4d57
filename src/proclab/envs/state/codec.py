"""procgen's little-endian byte stream (``src/buffer.h``), read and written by field specs.

Every serialized structure of procgen 0.10.7 is a sequence of a few primitive kinds, so each
structure is described once as a tuple of ``(name, kind)`` pairs (see :mod:`.layout`) and this
module reads or writes any such tuple. Keeping the layout declarative means a game's own fields
are a short table, and reading and writing cannot drift apart: both walk the same spec.

Kinds: ``i`` int32, ``f`` float32, ``b`` bool stored as int32 0/1, ``s`` string (int32 length
then bytes, kept as ``bytes``), ``vi``/``vf``/``vb`` vectors of those (int32 count first, kept
as tuples), ``rng`` a procgen ``RandGen`` (int32 ``is_seeded`` then the mt19937 state as text),
``ents`` a list of entities (int32 count, then fixed 120-byte records; handled by the caller
through :class:`RecordCodec`, since the entity record is defined with :class:`~.model.Entity`).
"""

from __future__ import annotations

import struct

import numpy as np

from proclab.errors import ProclabError

_I32 = struct.Struct("<i")
_F32 = struct.Struct("<f")

_STRUCT_CODE = {"i": "i", "f": "f", "b": "i"}


class RecordCodec:
    """A fixed-size record of scalar fields (procgen's Entity): one ``struct`` call per record."""

    def __init__(self, spec: tuple[tuple[str, str], ...]):
        self.struct = struct.Struct("<" + "".join(_STRUCT_CODE[kind] for _, kind in spec))
        self.bools = tuple(i for i, (_, kind) in enumerate(spec) if kind == "b")

    def decode(self, chunk) -> tuple:
        values = list(self.struct.unpack(chunk))
        for i in self.bools:
            if values[i] not in (0, 1):
                raise ProclabError(f"game state is corrupt: an entity's bool field holds {values[i]}.")
            values[i] = values[i] == 1
        return tuple(values)

    def encode(self, values) -> bytes:
        return self.struct.pack(*(int(v) if isinstance(v, bool) else v for v in values))


class Reader:
    """Reads one serialized state front to back; every overrun is a one-line :class:`ProclabError`."""

    def __init__(self, data: bytes):
        self.data = memoryview(data)
        self.offset = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.offset + n > len(self.data):
            raise ProclabError(
                f"game state is truncated or corrupt: needed {n} bytes at offset {self.offset} of {len(self.data)}."
            )
        chunk = self.data[self.offset : self.offset + n]
        self.offset += n
        return chunk

    def int(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def float(self) -> float:
        return _F32.unpack(self._take(4))[0]

    def bool(self) -> bool:
        value = self.int()
        if value not in (0, 1):
            raise ProclabError(
                f"game state is corrupt: a bool field holds {value} at offset {self.offset - 4}."
            )
        return value == 1

    def bytes(self) -> bytes:
        return bytes(self._take(self.int()))

    def vector(self, kind: str) -> tuple:
        read = getattr(self, _SCALAR[kind])
        return tuple(read() for _ in range(self.int()))

    def records(self, codec: RecordCodec) -> list[tuple]:
        """A counted list of fixed-size records, each as a tuple of its field values."""
        return [codec.decode(self._take(codec.struct.size)) for _ in range(self.int())]

    def int_array(self) -> np.ndarray:
        """A counted int32 vector as an array (the grid: thousands of cells, read in one go)."""
        count = self.int()
        return np.frombuffer(self._take(4 * count), dtype="<i4").astype(np.int32)

    def field(self, kind: str):
        if kind in _SCALAR:
            return getattr(self, _SCALAR[kind])()
        if kind.startswith("v"):
            return self.vector(kind[1:])
        if kind == "rng":
            return (self.int(), self.bytes())
        raise AssertionError(f"unknown field kind {kind!r}")

    def fields(self, spec: tuple[tuple[str, str], ...]) -> dict:
        return {name: self.field(kind) for name, kind in spec}


class Writer:
    """Builds a serialized state in the exact layout :class:`Reader` reads."""

    def __init__(self):
        self.parts: list[bytes] = []

    def int(self, value: int) -> None:
        self.parts.append(_I32.pack(value))

    def float(self, value: float) -> None:
        self.parts.append(_F32.pack(value))

    def bool(self, value: bool) -> None:
        self.int(1 if value else 0)

    def bytes(self, value: bytes) -> None:
        self.int(len(value))
        self.parts.append(bytes(value))

    def vector(self, kind: str, values) -> None:
        self.int(len(values))
        write = getattr(self, _SCALAR[kind])
        for value in values:
            write(value)

    def records(self, codec: RecordCodec, records) -> None:
        self.int(len(records))
        self.parts.extend(codec.encode(values) for values in records)

    def int_array(self, values: np.ndarray) -> None:
        self.int(values.size)
        self.parts.append(np.ascontiguousarray(values, dtype="<i4").tobytes())

    def field(self, kind: str, value) -> None:
        if kind in _SCALAR:
            getattr(self, _SCALAR[kind])(value)
        elif kind.startswith("v"):
            self.vector(kind[1:], value)
        elif kind == "rng":
            self.int(value[0])
            self.bytes(value[1])
        else:
            raise AssertionError(f"unknown field kind {kind!r}")

    def fields(self, spec: tuple[tuple[str, str], ...], values: dict) -> None:
        for name, kind in spec:
            self.field(kind, values[name])

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


_SCALAR = {"i": "int", "f": "float", "b": "bool", "s": "bytes"}
