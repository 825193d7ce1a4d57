"""Which level a ``proclab level`` command works on: a generated one (game, mode, level seed) or a file's.

Generating a level is what procgen does when an env starts: a one-env vector env on the one-level
split ``SEED:1`` is created and its first state taken, so the level is exactly the one ``eval`` or
``train`` plays for that seed (with procgen's default options: backgrounds on, agent centred).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs.games import check_game
from proclab.errors import ProclabError
from proclab.levels.file import LevelState, read_level_states


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


@dataclass(frozen=True)
class Level:
    """One level to show or edit: its state, the game and mode it belongs to, and where it came from."""

    state: LevelState
    game: str
    mode: str
    source: str


def env_config(game: str, mode: str, split: str = "0:1") -> EnvConfig:
    """A one-env config of ``game``/``mode`` with procgen's default drawing options."""
    return EnvConfig(game=(game,), mode=mode, num_envs=1, split=split, num_threads=1)


def generate_level(game: str, mode: str, level_seed: int) -> LevelState:
    """The first state of level ``level_seed`` of ``game`` in ``mode``, as procgen starts it."""
    check_game(game, mode)
    if not 0 <= level_seed < 2**31:
        raise ProclabError(f"--level-seed must be in [0, 2^31), got {level_seed}")
    with ProcgenVecEnv(env_config(game, mode, f"{level_seed}:1")) as env:
        _, info = env.reset()
        data = env.slot_states()[0]
        seed = int(info["level_seed"][0])
    return LevelState(data, seed, f"generated: {game} {mode} level {seed}")


def pick_level(args: LevelArgs) -> Level:
    """The level ``args`` name (see :class:`LevelArgs`)."""
    if args.levels is None:
        state = generate_level(args.game, args.mode, args.level_seed)
        return Level(state, args.game, args.mode, f"{args.game} {args.mode} level {args.level_seed}")
    levels = read_level_states(args.levels)
    n = len(levels)
    if not -n <= args.index < n:
        raise ProclabError(f"--index {args.index} is outside {str(args.levels)!r}, which holds {n} state(s)")
    index = int(np.arange(n)[args.index])
    return Level(levels.states[index], levels.game, levels.mode, f"{args.levels} state {index}")


def play_frames(data: bytes, game: str, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """What procgen draws for state ``data``: the agent's ``(64, 64, 3)`` view and its ``(512, 512, 3)``
    rendering. Setting the state into a real env also proves procgen accepts the bytes."""
    with ProcgenVecEnv(env_config(game, mode), render_human=True) as env:
        env.reset()
        obs, info = env.restart_slots({0: data})
        return obs[0].transpose(1, 2, 0).copy(), info["human"][0].copy()
