"""The 16 Procgen games, their distribution modes, and the multi-task game lists.

Procgen aborts the whole process (a C++ fatal error) when a game is created in a mode it does
not implement, so validity is checked here, in Python, before any environment is built. The
tables below were established by creating every (game, mode) pair of procgen 0.10.7.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from proclab.errors import ProclabError, unknown_choice

GAMES: tuple[str, ...] = (
    "bigfish",
    "bossfight",
    "caveflyer",
    "chaser",
    "climber",
    "coinrun",
    "dodgeball",
    "fruitbot",
    "heist",
    "jumper",
    "leaper",
    "maze",
    "miner",
    "ninja",
    "plunder",
    "starpilot",
)

MODES: tuple[str, ...] = ("easy", "hard", "extreme", "memory", "exploration")

_MODE_GAMES: dict[str, frozenset[str]] = {
    "easy": frozenset(GAMES),
    "hard": frozenset(GAMES),
    "extreme": frozenset({"chaser", "dodgeball", "leaper", "starpilot"}),
    "memory": frozenset({"caveflyer", "dodgeball", "heist", "jumper", "maze", "miner"}),
    "exploration": frozenset(
        {"caveflyer", "climber", "coinrun", "heist", "jumper", "leaper", "maze", "ninja"}
    ),
}

# Procgen ends every episode itself; this is its built-in time limit (steps) for all 16 games.
EPISODE_TIME_LIMIT = 1000

# Multi-task game lists of the modern-srwm seed. Env slot i plays game ``games[i % len(games)]``.
GAME_LISTS: dict[str, tuple[str, ...]] = {
    "easy6": ("bigfish", "fruitbot", "maze", "leaper", "plunder", "starpilot"),
    "memory4": ("dodgeball", "heist", "maze", "miner"),
    "all16": (
        "bigfish",
        "fruitbot",
        "maze",
        "leaper",
        "plunder",
        "starpilot",
        "miner",
        "bossfight",
        "caveflyer",
        "chaser",
        "climber",
        "coinrun",
        "dodgeball",
        "heist",
        "jumper",
        "ninja",
    ),
}


def games_for_mode(mode: str) -> tuple[str, ...]:
    """Games that implement ``mode``, in canonical order."""
    check_mode(mode)
    return tuple(g for g in GAMES if g in _MODE_GAMES[mode])


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise unknown_choice("distribution mode", mode, MODES)
    return mode


def check_game(game: str, mode: str | None = None) -> str:
    """Return ``game`` if it exists (and supports ``mode``), else raise a one-line error."""
    if game not in GAMES:
        raise unknown_choice("game", game, GAMES)
    if mode is not None:
        check_mode(mode)
        if game not in _MODE_GAMES[mode]:
            raise ProclabError(
                f"game {game!r} has no {mode!r} mode; its modes are "
                f"{', '.join(m for m in MODES if game in _MODE_GAMES[m])}. "
                f"Games with {mode!r}: {', '.join(games_for_mode(mode))}."
            )
    return game


def resolve_games(names: str | Iterable[str], mode: str | None = None) -> tuple[str, ...]:
    """Expand game names and named lists (``easy6``, ``memory4``, ``all16``) into a checked tuple.

    Accepts a single string, comma-separated names, or an iterable of either.
    """
    items: Sequence[str] = [names] if isinstance(names, str) else list(names)
    flat: list[str] = []
    for item in items:
        for name in str(item).split(","):
            name = name.strip().lower()
            if not name:
                continue
            flat.extend(GAME_LISTS.get(name, (name,)))
    if not flat:
        raise ProclabError("no game given; name one of: " + ", ".join(GAMES))
    dupes = sorted({g for g in flat if flat.count(g) > 1})
    if dupes:
        raise ProclabError(f"game list repeats {', '.join(dupes)}; list each game once.")
    return tuple(check_game(g, mode) for g in flat)
