"""Demos in memory: the frames, rewards and per-demo columns that reward learning reads.

``proclab trex demos`` writes demos to an episode store (:mod:`proclab.store`): per step
``obs`` (uint8 ``(3, 64, 64)``, the frame before the action), ``action`` and ``reward``; per
demo ``demo_id``, ``game``, ``mode``, ``split`` (``train``/``test``), ``level_seed``,
``checkpoint``, ``checkpoint_step``, ``return`` and ``truncated`` (cut at the length cap).
:func:`demo_table` reads only the per-demo columns; :func:`read_demos` loads the frames of
the chosen demos into one :class:`Demos`, all frames concatenated, so that a clip is a range
of rows of one array.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from proclab.errors import ProclabError
from proclab.store import EpisodeStore

DEMO_COLUMNS = ("demo_id", "game", "mode", "split", "level_seed", "checkpoint", "return")


@dataclass(frozen=True)
class Demos:
    """``D`` demos: ``frames`` ``(F, 3, 64, 64)`` uint8 and ``rewards`` ``(F,)`` concatenated, demo
    ``i`` being rows ``offsets[i] : offsets[i] + lengths[i]``; per demo its length, return, id and the
    checkpoint that played it (``None``: unknown, taken as one)."""

    frames: np.ndarray
    rewards: np.ndarray
    lengths: np.ndarray
    returns: np.ndarray
    ids: np.ndarray
    checkpoints: np.ndarray | None = None

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)

    def __len__(self) -> int:
        return len(self.lengths)


def open_store(path: str | Path) -> EpisodeStore:
    store = EpisodeStore(path)
    missing = [c for c in DEMO_COLUMNS if c not in store.episodes]
    if missing:
        raise ProclabError(
            f"{str(path)!r} is an episode store but not a T-REX demo store (no {', '.join(missing)}); "
            "write demos with 'proclab trex demos'"
        )
    return store


def demo_table(
    store: EpisodeStore, game: str | None, mode: str | None = None
) -> tuple[str, dict[str, np.ndarray]]:
    """The game (``None``: the store's only one) and its demos' per-demo columns plus ``index`` (store row)."""
    table = store.episodes
    games = sorted(set(table["game"]))
    if not games:
        raise ProclabError(f"demo store {str(store.path)!r} holds no demos yet")
    if game is None:
        if len(games) > 1:
            raise ProclabError(
                f"demo store {str(store.path)!r} holds demos of {', '.join(games)}; pick one with --game"
            )
        game = games[0]
    keep = table["game"] == game
    if mode is not None:
        keep &= table["mode"] == mode
    if not keep.any():
        raise ProclabError(
            f"demo store {str(store.path)!r} holds no {game} demos{f' in {mode} mode' if mode else ''}; "
            f"it has demos of {', '.join(games)}"
        )
    rows = np.flatnonzero(keep)
    return game, {"index": rows, **{k: v[rows] for k, v in table.items()}}


def read_demos(store: EpisodeStore, rows) -> Demos:
    """Load the demos at store rows ``rows`` (in that order)."""
    rows = np.asarray(rows, np.int64)
    lengths = store.episodes["length"][rows].astype(np.int64)
    frames = np.empty((int(lengths.sum()), 3, 64, 64), np.uint8)
    rewards = np.empty(int(lengths.sum()), np.float32)
    at = 0
    for row, n in zip(rows, lengths, strict=True):
        steps = store.read(int(row), ["obs", "reward"])
        frames[at : at + n] = steps["obs"]
        rewards[at : at + n] = steps["reward"]
        at += n
    table = store.episodes
    returns = table["return"][rows].astype(np.float64)
    return Demos(frames, rewards, lengths, returns, table["demo_id"][rows], table["checkpoint"][rows])
