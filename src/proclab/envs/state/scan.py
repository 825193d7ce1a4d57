"""Reading procgen's state bytes cheaply: the step's outcome fields, the entity records and the grid.

A full :func:`~proclab.envs.state.parse_state` builds every entity and field as Python objects; what runs
at every step of every env slot (the recorder's ground truth, the goals of :mod:`.goals`, the steering
analyses) needs only the outcome in the header, the entities as one numpy record array and the grid, so
:func:`scan` walks the byte layout of :mod:`.layout` to those places and skips the rest.
"""

from __future__ import annotations

import struct

import numpy as np

from proclab.envs.state.layout import BASIC_FIELDS, GAME_FIELDS
from proclab.envs.state.model import ENTITY_FIELDS, PLAYER

_I32 = struct.Struct("<i")
_ENTITY = np.dtype([(name, "<f4" if kind == "f" else "<i4") for name, kind in ENTITY_FIELDS])
HEADER_WANTED = {"reward": "<f", "done": "<i", "level_complete": "<i", "cur_time": "<i", "timeout": "<i"}


class _Walk:
    """Walks one field spec of procgen's layout, reading only ``wanted`` fields (name -> struct format).

    Runs of fixed 4-byte fields are skipped in one addition; strings, random generators and vectors
    are skipped by their stored lengths.
    """

    def __init__(self, spec, wanted: dict[str, str]):
        self.plan: list[
            tuple[str, int, list]
        ] = []  # ("fixed", size, [(name, offset, struct)]) or (kind, 0, [])
        fixed, reads = 0, []
        for name, kind in spec:
            if kind in ("i", "f", "b"):
                if name in wanted:
                    reads.append((name, fixed, struct.Struct(wanted[name])))
                fixed += 4
                continue
            self.plan.append(("fixed", fixed, reads))
            self.plan.append((kind, 0, []))
            fixed, reads = 0, []
        self.plan.append(("fixed", fixed, reads))

    def read(self, data: bytes, offset: int, into: dict) -> int:
        for kind, size, reads in self.plan:
            if kind == "fixed":
                for name, at, fmt in reads:
                    into[name] = fmt.unpack_from(data, offset + at)[0]
                offset += size
            elif kind == "rng":  # is_seeded, then the generator's state as a string
                offset += 8 + _I32.unpack_from(data, offset + 4)[0]
            elif kind == "s":
                offset += 4 + _I32.unpack_from(data, offset)[0]
            else:  # vi / vf / vb: a count, then 4-byte items
                offset += 4 + 4 * _I32.unpack_from(data, offset)[0]
        return offset


_HEADER = _Walk(GAME_FIELDS, HEADER_WANTED)
_BASIC = _Walk(BASIC_FIELDS, {})


def scan(data: bytes) -> tuple[dict, np.ndarray, np.ndarray]:
    """The step's outcome fields, the entity records and the grid of one state (no copies, no checks:
    the bytes come straight from procgen: a caller parses each episode's first state in full once)."""
    header: dict = {}
    offset = 8 + _I32.unpack_from(data, 4)[0]  # version, then the game's name
    offset = _HEADER.read(data, offset, header) + 4  # grid_size
    count = _I32.unpack_from(data, offset)[0]
    entities = np.frombuffer(data, _ENTITY, count, offset + 4)
    offset = _BASIC.read(data, offset + 4 + count * _ENTITY.itemsize, {})
    width, height = _I32.unpack_from(data, offset)[0], _I32.unpack_from(data, offset + 4)[0]
    grid = np.frombuffer(data, "<i4", width * height, offset + 12).reshape(height, width)
    return header, entities, grid


def agent_record(entities: np.ndarray) -> np.void:
    """The agent's record among the entities :func:`scan` read (the first of type 0, as procgen finds it)."""
    return entities[np.flatnonzero(entities["type"] == PLAYER)[0]]
