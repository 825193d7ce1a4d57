"""Edits of a level: remove, move or add entities of a kind, move the agent (``proclab level edit``).

Edits apply in this order: every ``--remove``, every ``--move``, every ``--add``, then ``--move-agent``
(each flag may repeat). A *kind* is a name of the game's glossary (``proclab level show`` lists a
level's entities and cells; docs/ground-truth.md every game's names); a kind the game does not have
is refused with the valid ones. Positions are world units (x right, y up, one unit per cell; see
``proclab level show``). For cell kinds (CoinRun's coin, Maze's cheese) the same edits change grid
cells: a removed or moved cell leaves empty space, an added one fills the cell under the point.

The edited state is played once in a real procgen env (procgen must accept it) before it is kept, and
written atomically; ``--append`` adds it to an existing file of the same game and mode.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from proclab.envs.state import (
    GameState,
    add_entity,
    glossary,
    move_agent,
    move_entity,
    parse_state,
    positions,
    remove_entities,
    serialize_state,
)
from proclab.errors import ProclabError
from proclab.levels.file import LevelState, level_states, read_level_states, write_level_states
from proclab.levels.level import Level, play_frames


@dataclass(frozen=True)
class LevelEdits:
    """What to change in a level, each edit a spec as ``proclab level edit`` takes it (applied in the module
    docstring's order)."""

    remove: tuple[str, ...] = ()  # KIND (every one of that kind) or KIND@X,Y (the one nearest to X,Y)
    move: tuple[str, ...] = ()  # KIND=X,Y (the first), KIND#I=X,Y (the I-th) or KIND@X0,Y0=X,Y (the nearest)
    add: tuple[str, ...] = ()  # KIND=X,Y: one more of that kind centred at X,Y
    move_agent: str | None = None  # X,Y: the agent's new centre


def _xy(text: str, flag: str) -> tuple[float, float]:
    try:
        x, y = (float(v) for v in text.split(","))
    except ValueError:
        raise ProclabError(f"{flag}: expected a position X,Y (two numbers), got {text!r}") from None
    return x, y


def _kind(state: GameState, kind: str) -> str:
    """``kind`` if ``state``'s game has it; else a one-line error listing the game's kinds."""
    glossary(state.game).type_of(kind)
    return kind


def _nearest_index(state: GameState, kind: str, xy: tuple[float, float], flag: str) -> int:
    found = positions(state, kind)
    if len(found) == 0:
        raise ProclabError(f"{flag}: the level has no {kind!r}")
    return int(np.argmin(np.hypot(found[:, 0] - xy[0], found[:, 1] - xy[1])))


def apply_remove(state: GameState, spec: str) -> GameState:
    kind, _, at = spec.partition("@")
    kind = _kind(state, kind)
    if not at:
        return remove_entities(state, kind)
    target = positions(state, kind)[_nearest_index(state, kind, _xy(at, "--remove"), "--remove")]
    return remove_entities(state, kind, where=lambda x, y: (x, y) == (target[0], target[1]))


def apply_move(state: GameState, spec: str) -> GameState:
    which, sep, to = spec.partition("=")
    if not sep:
        raise ProclabError(f"--move: expected KIND=X,Y, KIND#I=X,Y or KIND@X0,Y0=X,Y, got {spec!r}")
    if "@" in which:
        kind, at = which.split("@", 1)
        index = _nearest_index(state, _kind(state, kind), _xy(at, "--move"), "--move")
    else:
        kind, _, number = which.partition("#")
        try:
            index = int(number) if number else 0
        except ValueError:
            raise ProclabError(f"--move: {number!r} is no index in {spec!r}") from None
    return move_entity(state, _kind(state, kind), _xy(to, "--move"), index=index)


def apply_add(state: GameState, spec: str) -> GameState:
    kind, sep, at = spec.partition("=")
    if not sep:
        raise ProclabError(f"--add: expected KIND=X,Y, got {spec!r}")
    return add_entity(state, _kind(state, kind), _xy(at, "--add"))


def edit_state(state: GameState, edits: LevelEdits) -> tuple[GameState, str]:
    """``state`` with every edit applied (in the module docstring's order), and a note of them."""
    done = []
    for flag, specs, apply in (("remove", edits.remove, apply_remove), ("move", edits.move, apply_move),
                               ("add", edits.add, apply_add)):  # fmt: skip
        for spec in specs:
            state = apply(state, spec)
            done.append(f"{flag} {spec}")
    if edits.move_agent is not None:
        state = move_agent(state, _xy(edits.move_agent, "--move-agent"))
        done.append(f"agent to {edits.move_agent}")
    if not done:
        raise ProclabError("no edit given: use --remove, --move, --add or --move-agent (see --help)")
    return state, "; ".join(done)


def edit_level(level: Level, edits: LevelEdits) -> tuple[Level, GameState]:
    """``level`` edited (procgen checked to play it), its note naming the edits; and its parsed state."""
    state, note = edit_state(parse_state(level.state.data), edits)
    data = serialize_state(state)
    play_frames(data, level.game, level.mode)  # procgen must accept the edited bytes
    edited = LevelState(data, level.state.level_seed, f"{level.source}: {note}")
    return dataclasses.replace(level, state=edited), state


def save_level(path: Path, level: Level, *, append: bool = False, overwrite: bool = False) -> Path:
    """Write ``level`` as a level-state file at ``path`` (``append``: after the levels already there, of the same
    game and mode); returns ``path``."""
    kept = []
    if append and path.exists():
        kept = list(read_level_states(path, game=level.game, mode=level.mode).states)
    levels = level_states(level.game, level.mode, [*kept, level.state])
    write_level_states(path, levels, overwrite=overwrite or append)
    return path
