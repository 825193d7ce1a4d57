"""``proclab level show``, ``proclab level edit`` and ``proclab level export``: levels from the command line.

Each reads its level (:class:`LevelArgs`: a generated one, game, mode and level seed, or a level-state file's)
or a store's first game states, calls the library (:mod:`.show`, :mod:`.edit`, :mod:`.export`) and writes.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro
from rich.console import Console

from proclab.errors import ProclabError
from proclab.io.arguments import DATA, settings_from
from proclab.levels.edit import LevelEdits, edit_level, save_level
from proclab.levels.export import initial_states
from proclab.levels.file import write_level_states
from proclab.levels.level import Level, play_frames
from proclab.levels.picture import save_level_picture
from proclab.levels.show import print_tables, show
from proclab.store import EpisodeStore


@dataclass(frozen=True)
class LevelArgs:
    """The level to work on: --levels FILE (and --index), or a generated --game/--mode/--level-seed."""

    levels: Path | None = None
    """A level-state file to read the level from (instead of generating --game/--mode/--level-seed)."""
    index: int = 0
    """Which state of --levels (0 = the first; negative counts from the end)."""
    game: str = "coinrun"
    """Game of a generated level."""
    mode: str = "easy"
    """Distribution mode of a generated level (easy, hard, extreme, memory, exploration)."""
    level_seed: int = 0
    """Level seed of a generated level (the level procgen plays for that seed)."""


def pick_level(args: LevelArgs) -> Level:
    """The level ``args`` name (see :class:`LevelArgs`)."""
    if args.levels is None:
        return Level.generate(args.game, args.level_seed, args.mode)
    return Level.read(args.levels, args.index)


# -- level show -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShowArgs(LevelArgs):
    """Print a level's parsed state (entities, grid cells, the game's own fields) and render it as a PNG."""

    png: Path | None = None
    """Where to write the picture (default: <game>-<mode>-level<seed>.png, or <file>-<index>.png)."""
    picture: bool = True
    """Render the PNG (--no-picture: only print)."""
    json: bool = False
    """Print the parsed state as JSON instead of tables."""


def picture_path(args: ShowArgs, level: Level) -> Path:
    if args.png is not None:
        return args.png
    if args.levels is not None:
        return Path(f"{args.levels.name.split('.')[0]}-{args.index}.png")
    return Path(f"{level.game}-{level.mode}-level{level.state.level_seed}.png")


def show_command(argv: list[str], prog: str = "proclab level show") -> None:
    args = tyro.cli(ShowArgs, args=argv, prog=prog)
    console = Console(stderr=args.json)
    level = pick_level(args)
    png = picture_path(args, level) if args.picture else None
    info = show(level, png)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
    else:
        print_tables(info, console)
    if png is not None:
        console.print(f"picture: {png}")


# -- level edit -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EditArgs(LevelArgs):
    """Edit a level (remove, move or add entities of a kind; move the agent) and write it as a level-state file."""

    out: Annotated[Path, tyro.conf.arg(metavar="OUT")] = dataclasses.field(kw_only=True)
    """Level-state file to write (by convention NAME.levels.json)."""
    remove: tyro.conf.UseAppendAction[tuple[str, ...]] = ()
    """KIND (every one of that kind) or KIND@X,Y (the one nearest to X,Y); repeatable."""
    move: tyro.conf.UseAppendAction[tuple[str, ...]] = ()
    """KIND=X,Y (the first of that kind), KIND#I=X,Y (the I-th, as listed by level show) or
    KIND@X0,Y0=X,Y (the one nearest to X0,Y0); repeatable."""
    add: tyro.conf.UseAppendAction[tuple[str, ...]] = ()
    """KIND=X,Y: one more of that kind centred at X,Y (a cell kind fills the cell under it); repeatable."""
    move_agent: Annotated[str | None, tyro.conf.arg(metavar="X,Y")] = None
    """Move the agent's centre to X,Y."""
    append: bool = False
    """Add the edited level to the file OUT (same game and mode) instead of writing a new one."""
    overwrite: bool = False
    """Replace OUT if it exists (without --append)."""
    png: Path | None = None
    """Also render the edited level as a PNG (as proclab level show does)."""


def edit_command(argv: list[str], prog: str = "proclab level edit") -> None:
    args = tyro.cli(EditArgs, args=argv, prog=prog)
    level, state = edit_level(pick_level(args), settings_from(args, LevelEdits))
    out = save_level(args.out, level, append=args.append, overwrite=args.overwrite)
    console = Console()
    console.print(f"{level.state.note}")
    if args.png is not None:
        _, human = play_frames(level.state.data, level.game, level.mode)
        save_level_picture(args.png, state, human, level.state.note)
        console.print(f"picture: {args.png}")
    console.print(f"level-state file: {out}")


# -- level export -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExportArgs:
    """Write recorded episodes' first game states as a level-state file (to show, edit or replay them)."""

    data: Annotated[Path, DATA]
    """The episode store (recorded with ground truth, proclab record's default)."""
    out: Annotated[Path, tyro.conf.arg(metavar="OUT")] = dataclasses.field(kw_only=True)
    """Level-state file to write (by convention NAME.levels.json)."""
    episode: tyro.conf.UseAppendAction[tuple[int, ...]] = ()
    """Episode index in the store (repeatable; negative counts from the end). Default: every episode."""
    overwrite: bool = False
    """Replace OUT if it exists."""


def export_command(argv: list[str], prog: str = "proclab level export") -> None:
    args = tyro.cli(ExportArgs, args=argv, prog=prog)
    store = EpisodeStore(args.data)
    if store.num_episodes == 0:
        raise ProclabError(f"episode store {str(args.data)!r} holds no committed episode")
    episodes = list(args.episode) or list(range(store.num_episodes))
    levels = initial_states(store, episodes)
    write_level_states(args.out, levels, overwrite=args.overwrite)
    print(f"{len(levels)} {levels.game} {levels.mode}-mode level(s) from {args.data}")
    print(f"level-state file: {args.out}")
