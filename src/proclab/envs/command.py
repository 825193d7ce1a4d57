"""``proclab games``: the Procgen games, which modes each supports, and the named level splits."""

from __future__ import annotations

import json
from dataclasses import dataclass

import tyro
from rich.console import Console
from rich.table import Table

from proclab.envs.games import GAME_LISTS, GAMES, MODES, games_for_mode
from proclab.envs.levels import NAMED_SPLITS
from proclab.envs.scores import score_bounds


@dataclass(frozen=True)
class GamesArgs:
    """List the Procgen games, their distribution modes and the named level splits."""

    json: bool = False
    """Print machine-readable JSON instead of tables."""


def games_command(argv: list[str], prog: str = "proclab games") -> None:
    args = tyro.cli(GamesArgs, args=argv, prog=prog)

    support = {m: set(games_for_mode(m)) for m in MODES}
    if args.json:
        print(
            json.dumps(
                {
                    "games": {
                        g: {
                            "modes": [m for m in MODES if g in support[m]],
                            "score_bounds": {m: score_bounds(g, m) for m in ("easy", "hard")},
                        }
                        for g in GAMES
                    },
                    "game_lists": GAME_LISTS,
                    "splits": {n: {"start": s.start, "num": s.num} for n, s in NAMED_SPLITS.items()},
                },
                indent=2,
            )
        )
        return

    games = Table(title="Procgen games (✓ = mode available)")
    games.add_column("game")
    for m in MODES:
        games.add_column(m, justify="center")
    games.add_column("easy R_min..R_max", justify="right")
    games.add_column("hard R_min..R_max", justify="right")
    for g in GAMES:
        e, h = score_bounds(g, "easy"), score_bounds(g, "hard")
        games.add_row(
            g, *("✓" if g in support[m] else "" for m in MODES), f"{e[0]:g}..{e[1]:g}", f"{h[0]:g}..{h[1]:g}"
        )
    splits = Table(title="Named level splits (or give START:NUM)")
    splits.add_column("split")
    splits.add_column("levels")
    for name, s in NAMED_SPLITS.items():
        splits.add_row(name, s.label().removeprefix(name).strip())
    lists = Table(title="Multi-task game lists")
    lists.add_column("name")
    lists.add_column("games")
    for name, gl in GAME_LISTS.items():
        lists.add_row(name, ", ".join(gl))
    console = Console()
    for table in (games, splits, lists):
        console.print(table)
