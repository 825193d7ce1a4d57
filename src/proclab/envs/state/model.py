"""The typed game state: :class:`Entity`, :class:`GameState`, :func:`parse_state`, :func:`serialize_state`.

A :class:`GameState` keeps *every* serialized field, so that :func:`serialize_state` gives back the
exact bytes :func:`parse_state` read; the fields a researcher wants (grid, entities, agent, the
game's own fields) are first-class, the rest (options, random generators, camera) sit in
``header`` and ``basic`` under procgen's own names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, make_dataclass

import numpy as np

from proclab.envs.games import GAMES
from proclab.envs.state.codec import Reader, RecordCodec, Writer
from proclab.envs.state.glossary import glossary
from proclab.envs.state.layout import (
    BASIC_FIELDS,
    END_OF_BUFFER,
    GAME_EXTRA_FIELDS,
    GAME_FIELDS,
    SERIALIZE_VERSION,
)
from proclab.errors import ProclabError

PLAYER = 0  # procgen's entity type of the agent in every game (object-ids.h)


@dataclass(frozen=True)
class Entity:
    """One procgen entity (``src/entity.h``), field for field in serialization order.

    Positions are world units, the origin at the bottom-left of the level and y pointing up;
    ``(x, y)`` is the centre and ``(rx, ry)`` the half-extents. ``kind`` is the glossary's name
    for ``type`` in this game (not serialized).
    """

    x: float
    y: float
    vx: float
    vy: float
    rx: float
    ry: float
    type: int
    image_type: int
    image_theme: int
    render_z: int
    will_erase: bool
    collides_with_entities: bool
    collision_margin: float
    rotation: float
    vrot: float
    is_reflected: bool
    fire_time: int
    spawn_time: int
    life_time: int
    expire_time: int
    use_abs_coords: bool
    friction: float
    smart_step: bool
    avoids_collisions: bool
    auto_erase: bool
    alpha: float
    health: float
    theta: float
    grow_rate: float
    alpha_decay: float
    climber_spawn_x: float
    kind: str = field(default="", compare=False)


_TYPE_KIND = {"float": "f", "int": "i", "bool": "b"}
ENTITY_FIELDS = tuple((f.name, _TYPE_KIND[f.type]) for f in dataclasses.fields(Entity) if f.name != "kind")
_ENTITY = RecordCodec(ENTITY_FIELDS)
_PY_TYPE = {"i": int, "f": float, "b": bool, "s": bytes, "rng": tuple[int, bytes], "ents": list[Entity]}


def _py_type(kind: str):
    return tuple[_PY_TYPE[kind[1:]], ...] if kind.startswith("v") else _PY_TYPE[kind]


def _fields_class(name: str, spec, doc: str):
    cls = make_dataclass(name, [(n, _py_type(k)) for n, k in spec], frozen=True)
    cls.__doc__ = doc
    cls.__module__ = __name__
    return cls


GameHeader = _fields_class(
    "GameHeader",
    GAME_FIELDS,
    "procgen's ``Game`` fields: options, level seeds, random generators, step bookkeeping.",
)
BasicFields = _fields_class(
    "BasicFields",
    BASIC_FIELDS,
    "procgen's ``BasicAbstractGame`` fields besides entities and grid: physics, camera, world size.",
)
GAME_FIELDS_CLASSES = {
    game: _fields_class(f"{game.capitalize()}Fields", spec, f"{game}'s own serialized fields, in order.")
    for game, spec in GAME_EXTRA_FIELDS.items()
}


@dataclass(frozen=True, eq=False)
class GameState:
    """One parsed procgen game state (of :func:`parse_state`); edit with :mod:`.edit`'s functions.

    Two states are equal when they serialize to the same bytes (the grid is an array, so the
    field-wise comparison of a plain dataclass would be ambiguous).
    """

    game: str
    header: GameHeader
    grid_size: int
    entities: list[Entity]
    basic: BasicFields
    grid: np.ndarray
    """Cell types, ``int32 (H, W)``, ``grid[y, x]`` with row 0 at the *bottom* of the world."""
    extra: object
    """The game's own fields (``<Game>Fields``; e.g. ``coinrun``'s ``has_support``, ``facing_right``)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GameState) and serialize_state(self) == serialize_state(other)

    __hash__ = None

    @property
    def agent(self) -> Entity:
        """The agent (the first entity of type 0, as procgen's ``deserialize`` finds it)."""
        return self.entities[agent_index(self.entities)]


def agent_index(entities: list[Entity]) -> int:
    for i, entity in enumerate(entities):
        if entity.type == PLAYER:
            return i
    raise ProclabError("game state has no agent entity (type 0); procgen would refuse it.")


_ENTITY_NAMES = tuple(name for name, _ in ENTITY_FIELDS)
_TYPE = _ENTITY_NAMES.index("type")


def _build(cls, values):
    """An instance of the frozen dataclass ``cls`` from decoded values, without the frozen
    ``__init__``'s ``object.__setattr__`` per field: states hold hundreds of entities (starpilot,
    fruitbot), and this halves the time to parse them. The values are already typed by the codec."""
    instance = object.__new__(cls)
    instance.__dict__.update(values)
    return instance


def _entity(values: tuple, kind: str) -> Entity:
    entity = _build(Entity, zip(_ENTITY_NAMES, values, strict=True))
    entity.__dict__["kind"] = kind
    return entity


def _entities(reader: Reader, game: str) -> list[Entity]:
    names = glossary(game).entities
    return [
        _entity(values, names.get(values[_TYPE], f"type{values[_TYPE]}"))
        for values in reader.records(_ENTITY)
    ]


def _read(reader: Reader, spec, game: str) -> dict:
    return {name: _entities(reader, game) if kind == "ents" else reader.field(kind) for name, kind in spec}


def _write(writer: Writer, spec, values: dict) -> None:
    for name, kind in spec:
        if kind == "ents":
            writer.records(_ENTITY, [tuple(map(e.__dict__.__getitem__, _ENTITY_NAMES)) for e in values[name]])
        else:
            writer.field(kind, values[name])


def _game_name(reader: Reader) -> str:
    version = reader.int()
    if version != SERIALIZE_VERSION:
        raise ProclabError(
            f"game state has serialization version {version}; proclab reads procgen 0.10.7's version "
            f"{SERIALIZE_VERSION} only."
        )
    name = reader.bytes().decode("ascii", errors="replace")
    if name not in GAMES:
        raise ProclabError(f"game state is of unknown game {name!r}; expected one of {', '.join(GAMES)}.")
    return name


def parse_state(data: bytes) -> GameState:
    """Parse the bytes of procgen's ``get_state`` (one env) into a :class:`GameState`."""
    reader = Reader(data)
    game = _game_name(reader)
    header = _build(GameHeader, reader.fields(GAME_FIELDS))
    grid_size = reader.int()
    entities = _entities(reader, game)
    basic = _build(BasicFields, reader.fields(BASIC_FIELDS))
    width, height = reader.int(), reader.int()
    cells = reader.int_array()
    if cells.size != width * height or width <= 0:
        raise ProclabError(f"game state is corrupt: a {width}x{height} grid holds {cells.size} cells.")
    grid = cells.reshape(height, width)
    extra = _build(GAME_FIELDS_CLASSES[game], _read(reader, GAME_EXTRA_FIELDS[game], game))
    if reader.int() != END_OF_BUFFER or reader.offset != len(reader.data):
        raise ProclabError(f"game state of {game} does not end where procgen 0.10.7's layout ends; refused.")
    state = GameState(game, header, grid_size, entities, basic, grid, extra)
    agent_index(entities)
    return state


def serialize_state(state: GameState) -> bytes:
    """The bytes procgen's ``set_state`` reads; byte-identical to the input of :func:`parse_state`."""
    writer = Writer()
    writer.int(SERIALIZE_VERSION)
    writer.bytes(state.game.encode("ascii"))
    writer.fields(GAME_FIELDS, state.header.__dict__)
    writer.int(state.grid_size)
    _write(writer, (("entities", "ents"),), {"entities": state.entities})
    writer.fields(BASIC_FIELDS, state.basic.__dict__)
    height, width = state.grid.shape
    writer.int(width)
    writer.int(height)
    writer.int_array(state.grid.reshape(-1))
    _write(
        writer,
        GAME_EXTRA_FIELDS[state.game],
        state.extra.__dict__,
    )
    writer.int(END_OF_BUFFER)
    return writer.getvalue()
