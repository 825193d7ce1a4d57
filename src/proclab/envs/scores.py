"""Normalised Procgen scores: (R - R_min) / (R_max - R_min), per game, per difficulty.

Constants are those of the Procgen paper (Cobbe et al. 2020). For easy Jumper and Leaper the
literature disagrees: the paper-style table (and later repos) use R_min = 3 for both, while
``openai/train-procgen``'s ``constants.py`` uses 1 (Jumper) and 1.5 (Leaper). proclab pins the
paper-style values (``bounds="paper"``); pass ``bounds="train-procgen"`` for the other set. The
difference moves a 16-game mean by about 0.01.

Procgen publishes constants for easy and hard only, so the constants of the other modes are a
convention, and which one the modern-srwm paper used for its memory-mode scores is not
established (its code aggregates offline; srwm_impala_procgen.md section 3 lists easy constants
for the memory games). proclab scores extreme, memory and exploration runs with the hard
constants by default; ``table`` picks the difficulty whose constants apply explicitly (``proclab
eval --score-table easy``). Every result records the table it used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from proclab.envs.games import check_game, check_mode
from proclab.errors import unknown_choice

# game: ((easy_min, easy_max), (hard_min, hard_max))
_BOUNDS: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    "coinrun": ((5, 10), (5, 10)),
    "starpilot": ((2.5, 64), (1.5, 35)),
    "caveflyer": ((3.5, 12), (2, 13.4)),
    "dodgeball": ((1.5, 19), (1.5, 19)),
    "fruitbot": ((-1.5, 32.4), (-0.5, 27.2)),
    "chaser": ((0.5, 13), (0.5, 14.2)),
    "miner": ((1.5, 13), (1.5, 20)),
    "jumper": ((3, 10), (1, 10)),
    "leaper": ((3, 10), (1.5, 10)),
    "maze": ((5, 10), (4, 10)),
    "bigfish": ((1, 40), (0, 40)),
    "heist": ((3.5, 10), (2, 10)),
    "climber": ((2, 12.6), (1, 12.6)),
    "plunder": ((4.5, 30), (3, 30)),
    "ninja": ((3.5, 10), (2, 10)),
    "bossfight": ((0.5, 13), (0.5, 13)),
}
_TRAIN_PROCGEN_EASY_MIN = {"jumper": 1.0, "leaper": 1.5}
BOUND_SETS = ("paper", "train-procgen")
SCORE_TABLES = ("easy", "hard")


def score_table(mode: str, table: str | None = None) -> str:
    """The difficulty whose constants score ``mode``: ``table`` if given, else easy for easy, hard otherwise."""
    check_mode(mode)
    if table is None:
        return "easy" if mode == "easy" else "hard"
    if table not in SCORE_TABLES:
        raise unknown_choice("score table", table, SCORE_TABLES)
    return table


def score_bounds(
    game: str, mode: str = "easy", bounds: str = "paper", table: str | None = None
) -> tuple[float, float]:
    """(R_min, R_max) used to normalise ``game`` returns in ``mode`` (with ``table``'s constants, if given)."""
    check_game(game)
    if bounds not in BOUND_SETS:
        raise unknown_choice("score bound set", bounds, BOUND_SETS)
    easy, hard = _BOUNDS[game]
    if score_table(mode, table) == "hard":
        return hard
    if bounds == "train-procgen" and game in _TRAIN_PROCGEN_EASY_MIN:
        return (_TRAIN_PROCGEN_EASY_MIN[game], easy[1])
    return easy


def normalized_score(game: str, returns, mode: str = "easy", bounds: str = "paper", table: str | None = None):
    """Normalised score of ``returns`` (a number or array) for ``game``; same shape out."""
    lo, hi = score_bounds(game, mode, bounds, table)
    out = (np.asarray(returns, dtype=np.float64) - lo) / (hi - lo)
    return float(out) if out.ndim == 0 else out


def mean_normalized_score(
    mean_returns: Mapping[str, float], mode: str = "easy", bounds: str = "paper", table: str | None = None
) -> float:
    """Average over games of each game's normalised mean return (the Procgen-paper aggregate)."""
    scores: Iterable[float] = (normalized_score(g, r, mode, bounds, table) for g, r in mean_returns.items())
    return float(np.mean(list(scores)))
