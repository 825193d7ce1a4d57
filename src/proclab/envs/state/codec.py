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

import functools
import struct

import numpy as np

from proclab.errors import ProclabError

_I32 = struct.Struct("<i")
_F32 = struct.Struct("<f")


class RecordCodec:
    """Fixed-size records of scalar fields (procgen's Entity), decoded and encoded a whole list at a
    time through a numpy structured dtype: states hold up to hundreds of entities."""

    def __init__(self, spec: tuple[tuple[str, str], ...]):
        self.dtype = np.dtype([(name, "<f4" if kind == "f" else "<i4") for name, kind in spec])
        self.bools = [i for i, (_, kind) in enumerate(spec) if kind == "b"]
        self.size = self.dtype.itemsize

    def decode(self, chunk, count: int) -> list[tuple]:
        table = np.frombuffer(chunk, dtype=self.dtype, count=count)
        flags = np.frombuffer(chunk, dtype="<i4").reshape(count, len(self.dtype))[:, self.bools]
        if (flags & ~1).any():
            raise ProclabError("game state is corrupt: an entity's bool field is neither 0 nor 1.")
        columns = [table[name].tolist() for name in self.dtype.names]
        for column, i in enumerate(self.bools):
            columns[i] = flags[:, column].astype(bool).tolist()
        return list(zip(*columns, strict=True))

    def encode(self, records) -> bytes:
        return np.array([tuple(r) for r in records], dtype=self.dtype).tobytes()


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
        count = self.int()
        return codec.decode(self._take(count * codec.size), count)

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
        values = {}
        for step in _plan(spec):
            if isinstance(step, _Run):
                values.update(step.decode(self._take(step.struct.size)))
            else:
                values[step[0]] = self.field(step[1])
        return values


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
        self.parts.append(codec.encode(records))

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
        for step in _plan(spec):
            if isinstance(step, _Run):
                self.parts.append(
                    step.struct.pack(*(int(values[n]) if b else values[n] for n, b in step.fields))
                )
            else:
                self.field(step[1], values[step[0]])

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


_SCALAR = {"i": "int", "f": "float", "b": "bool", "s": "bytes"}


class _Run:
    """Consecutive int/float/bool fields of a spec, read or written with one ``struct`` call."""

    def __init__(self, fields: list[tuple[str, str]]):
        self.struct = struct.Struct("<" + "".join("f" if kind == "f" else "i" for _, kind in fields))
        self.fields = [(name, kind == "b") for name, kind in fields]

    def decode(self, chunk) -> dict:
        values = {}
        for (name, is_bool), value in zip(self.fields, self.struct.unpack(chunk), strict=True):
            if is_bool:
                if value not in (0, 1):
                    raise ProclabError(f"game state is corrupt: the bool field {name} holds {value}.")
                value = value == 1
            values[name] = value
        return values


@functools.cache
def _plan(spec: tuple[tuple[str, str], ...]) -> list:
    """``spec`` as steps: a :class:`_Run` per stretch of scalars, ``(name, kind)`` for the rest."""
    steps: list = []
    run: list[tuple[str, str]] = []
    for name, kind in spec:
        if kind in ("i", "f", "b"):
            run.append((name, kind))
            continue
        if run:
            steps.append(_Run(run))
            run = []
        steps.append((name, kind))
    if run:
        steps.append(_Run(run))
    return steps
