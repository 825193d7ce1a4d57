"""Which level a ``proclab level`` command works on: a generated one (game, mode, level seed) or a file's
(:class:`~proclab.levels.level.Level`, :func:`~proclab.levels.level.generate_level`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from proclab.levels.level import Level


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
