"""Level-state files: one or more Procgen game states, with the game, mode and procgen version they belong to.

A level-state file (``*.levels.json`` by convention) is plain JSON, so it can be read by eye and
by any language, and holds nothing that executes (no pickle):

.. code-block:: json

    {
      "format": "proclab-level-states",
      "version": 1,
      "game": "coinrun",
      "mode": "easy",
      "procgen_version": "0.10.7",
      "states": [
        {"level_seed": 17, "note": "moved coin to (12.5, 3.5)", "encoding": "zlib+base64",
         "sha256": "9f86d0...", "data": "eJz..."}
      ]
    }

``data`` is the state procgen's ``get_state`` returns (the game's C++ ``serialize``), zlib-compressed
(a state is mostly zeros: a CoinRun state of 38 kB compresses to ~2 kB) and base64-encoded.
``sha256`` is the SHA-256 of the state's bytes (decompressed), so that an edit of the bytes outside
proclab is found: recompressed, altered bytes are still a well-formed zlib stream, and most alterations
still parse as a state, which procgen would play without a word. ``level_seed`` and ``note`` are for
people; the bytes are the truth.

**Refusals.** Procgen's ``set_state`` aborts the process on bytes it cannot read, and a state of
another procgen version, game or mode would play a different game than the one named. So
:func:`read_level_states` parses every state (:func:`proclab.envs.state.parse_state`) and refuses, in
one line, a file of another format or version, another installed procgen, a game or mode other
than the caller plays, bytes that are not a state of the file's game and mode, a state whose bytes do
not match its ``sha256``, and a state holding an entity type or grid cell the game does not have
(:func:`proclab.envs.state.glossary` names every kind the game makes). A state written before files
carried ``sha256`` is still read (the same version: the field is optional), with a one-line warning that
its bytes could not be checked, since a file cannot prove that it was never edited.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import warnings
import zlib
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from proclab.envs.games import check_game, check_mode
from proclab.envs.state import glossary, parse_state
from proclab.errors import ProclabError
from proclab.io.files import read_json, write_json

FORMAT = "proclab-level-states"
VERSION = 1
ENCODING = "zlib+base64"
SUFFIX = ".levels.json"


GAME_CODE = {"procgen-gym": "0.10.7"}
"""Builds that carry a version of their own and procgen's C++ games of another: procgen-gym 0.1.x (Python
3.13) compiles procgen 0.10.7's games, whose states it writes byte for byte alike (docs/install.md)."""


def procgen_version() -> str:
    """The version of the installed procgen's games: the ``procgen2`` (3.11) or ``procgen-mirror`` (3.12)
    rebuild's, the original ``procgen`` wheel's, or the release procgen-gym (3.13) is built from."""
    for dist in ("procgen2", "procgen-mirror", "procgen", *GAME_CODE):
        try:
            found = version(dist)
        except PackageNotFoundError:
            continue
        return GAME_CODE.get(dist, found)
    return "unknown"


@dataclass(frozen=True)
class LevelState:
    """One game state: procgen's bytes, the level it was generated from, and a note on its origin."""

    data: bytes
    level_seed: int
    note: str = ""


@dataclass(frozen=True)
class LevelStates:
    """The content of a level-state file: states of one game and mode, in play order."""

    game: str
    mode: str
    states: tuple[LevelState, ...]
    procgen_version: str

    def __len__(self) -> int:
        return len(self.states)

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "version": VERSION,
            "game": self.game,
            "mode": self.mode,
            "procgen_version": self.procgen_version,
            "states": [
                {
                    "level_seed": s.level_seed,
                    "note": s.note,
                    "encoding": ENCODING,
                    "sha256": digest(s.data),
                    "data": base64.b64encode(zlib.compress(s.data, 6)).decode("ascii"),
                }
                for s in self.states
            ],
        }


MODE_CODES = {"easy": 0, "hard": 1, "extreme": 2, "memory": 10, "exploration": 1}
"""procgen's ``distribution_mode`` in a state's header per mode name; exploration mode plays one fixed
hard-mode level, so its states say ``hard`` (1)."""


def digest(data: bytes) -> str:
    """The SHA-256 a level-state file keeps of a state's (decompressed) bytes."""
    return hashlib.sha256(data).hexdigest()


def _state_game_mode(data: bytes) -> tuple[str, int]:
    """The game and the distribution-mode code a state's bytes belong to (read from its header); refuses
    an entity type or a cell value the game does not have."""
    state = parse_state(data)
    names = glossary(state.game)
    unknown = sorted({e.type for e in state.entities} - set(names.entities))
    if unknown:
        raise ProclabError(f"holds entities of type {unknown[:5]}, which {state.game} does not have")
    cells = sorted(set(state.grid.ravel().tolist()) - set(names.cells))
    if cells:
        raise ProclabError(f"holds grid cells of value {cells[:5]}, which {state.game} does not have")
    return state.game, state.header.distribution_mode


def level_states(game: str, mode: str, states: list[LevelState]) -> LevelStates:
    """States of one game and mode as a :class:`LevelStates` of the installed procgen, each one checked."""
    found = LevelStates(check_game(game), check_mode(mode), tuple(states), procgen_version())
    if not found.states:
        raise ProclabError("a level-state file needs at least one state")
    for i, s in enumerate(found.states):
        _check_state(s.data, game, mode, f"state {i}")
    return found


def write_level_states(path: str | Path, levels: LevelStates, overwrite: bool = False) -> Path:
    """Write ``levels`` to ``path`` atomically; an existing file is replaced only with ``overwrite``."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise ProclabError(f"level-state file {str(path)!r} exists; choose another path or pass --overwrite")
    return write_json(path, levels.to_json(), "level-state file", indent=1)


def read_level_states(path: str | Path, game: str | None = None, mode: str | None = None) -> LevelStates:
    """The level-state file at ``path``, checked whole; with ``game``/``mode``, refused if it is of others."""
    where = f"level-state file {str(path)!r}"
    doc = read_json(path, "level-state file")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ProclabError(f'{where} is not a proclab level-state file (no "format": "{FORMAT}")')
    if doc.get("version") != VERSION:
        raise ProclabError(f"{where} has format version {doc.get('version')!r}; this proclab reads {VERSION}")
    installed = procgen_version()
    if doc.get("procgen_version") != installed:
        raise ProclabError(
            f"{where} holds states of procgen {doc.get('procgen_version')!r}; the installed procgen is "
            f"{installed}, whose games may differ: regenerate the file with it"
        )
    file_game, file_mode = str(doc.get("game")), str(doc.get("mode"))
    if game is not None and file_game != game:
        raise ProclabError(f"{where} holds {file_game} levels; this command plays {game}")
    if mode is not None and file_mode != mode:
        raise ProclabError(f"{where} holds {file_mode}-mode levels; this command plays {mode} mode")
    states = doc.get("states")
    if not isinstance(states, list) or not states:
        raise ProclabError(f"{where} holds no states")
    check_game(file_game)
    check_mode(file_mode)
    decoded = tuple(_decode(entry, f"{where}, state {i}") for i, entry in enumerate(states))
    unchecked = [i for i, entry in enumerate(states) if "sha256" not in entry]
    if unchecked:
        warnings.warn(
            f"{where} was written before level-state files kept each state's SHA-256: the bytes of "
            f"{len(unchecked)} of its {len(states)} states cannot be checked for edits (write it again to add it)",
            stacklevel=2,
        )
    for i, s in enumerate(decoded):
        _check_state(s.data, file_game, file_mode, f"{where}, state {i}")
    return LevelStates(file_game, file_mode, decoded, installed)


def _decode(entry: object, where: str) -> LevelState:
    if (
        not isinstance(entry, dict)
        or entry.get("encoding") != ENCODING
        or not isinstance(entry.get("data"), str)
    ):
        raise ProclabError(f'{where}: expected an object with "encoding": "{ENCODING}" and "data"')
    try:
        data = zlib.decompress(base64.b64decode(entry["data"], validate=True))
    except (binascii.Error, zlib.error, ValueError) as err:
        raise ProclabError(f"{where}: its data is corrupt ({err})") from None
    if "sha256" in entry and entry["sha256"] != digest(data):
        raise ProclabError(
            f"{where}: its bytes do not match their sha256 (edited or damaged since proclab wrote them); "
            "regenerate the state (proclab level edit / level export)"
        )
    return LevelState(data, int(entry.get("level_seed", -1)), str(entry.get("note", "")))


def _check_state(data: bytes, game: str, mode: str, where: str) -> None:
    """Refuse bytes that are not a state of ``game`` in ``mode`` (parsing refuses other versions)."""
    try:
        found_game, code = _state_game_mode(data)
    except ProclabError as err:
        raise ProclabError(f"{where}: {err}") from None
    if (found_game, code) != (game, MODE_CODES[mode]):
        names = [m for m, c in MODE_CODES.items() if c == code] or [f"code {code}"]
        raise ProclabError(f"{where} is a {found_game} state of mode {'/'.join(names)}, not {game} {mode}")
