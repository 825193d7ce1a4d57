"""Collect finished episodes from vector-env ``info`` and summarise them per game.

The vector env reports, at every step, which env slots just finished an episode and that
episode's return, length, level and success. :class:`EpisodeLog` keeps the most recent
``window`` episodes of each game, which is what training curves show (a moving window, like
the 100-episode ``eprewmean`` of the Procgen paper), and the per-game normalised score.
:func:`rate` is the share of episodes that did something (reached a goal) with its exact interval.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from proclab.envs.scores import normalized_score
from proclab.stats.proportions import proportion


def quotas(episodes: int, slots: int) -> np.ndarray:
    """Episodes per slot (env, worker, shard), as even as possible, fixed in advance so that
    which episodes are played does not depend on which slot finishes first."""
    q = np.full(slots, episodes // slots)
    q[: episodes % slots] += 1
    return q


def rate(outcomes) -> dict:
    """``{"count", "of", "rate", "ci95"}`` of booleans per episode: how many are true, of how many, their
    share (None of none) and its exact interval (:func:`proclab.stats.proportions.proportion`)."""
    share = proportion(outcomes)
    return {"count": share.count, "of": share.of, "rate": share.share, "ci95": list(share.ci)}


class EpisodeLog:
    """Recent finished episodes per game; :meth:`summary` gives the numbers to log."""

    def __init__(self, games: tuple[str, ...], mode: str, window: int = 100):
        self.games = games
        self.mode = mode
        self.returns = {g: deque(maxlen=window) for g in games}
        self.lengths = {g: deque(maxlen=window) for g in games}
        self.completed = {g: deque(maxlen=window) for g in games}
        self.total = 0

    def add(self, info: dict, game_index: np.ndarray) -> int:
        """Record the episodes that ended at this step; returns how many did."""
        ep = info["episode"]
        done = np.flatnonzero(ep["done"])
        for i in done:
            g = self.games[game_index[i]]
            self.returns[g].append(float(ep["return"][i]))
            self.lengths[g].append(int(ep["length"][i]))
            self.completed[g].append(bool(ep["level_complete"][i]))
        self.total += len(done)
        return len(done)

    def summary(self) -> dict[str, float]:
        """Flat metrics: overall ``return_mean`` etc., plus ``<game>/return_mean`` for multi-task.

        The overall normalised score is the mean over games of each game's score (the
        Procgen-paper aggregate), so games with short episodes do not dominate it.
        """
        out: dict[str, float] = {}
        per_game_scores = []
        all_returns = [r for g in self.games for r in self.returns[g]]
        all_lengths = [n for g in self.games for n in self.lengths[g]]
        for g in self.games:
            if not self.returns[g]:
                continue
            mean = float(np.mean(self.returns[g]))
            score = normalized_score(g, mean, self.mode)
            per_game_scores.append(score)
            if len(self.games) > 1:
                out[f"{g}/return_mean"] = mean
                out[f"{g}/length_mean"] = float(np.mean(self.lengths[g]))
                out[f"{g}/normalized_score"] = score
        if all_returns:
            out["return_mean"] = float(np.mean(all_returns))
            out["return_std"] = float(np.std(all_returns))
            out["return_min"] = float(np.min(all_returns))
            out["return_max"] = float(np.max(all_returns))
            out["length_mean"] = float(np.mean(all_lengths))
            out["level_complete_rate"] = float(np.mean([c for g in self.games for c in self.completed[g]]))
            out["normalized_score"] = float(np.mean(per_game_scores))
        return out

    def charts(self, prefix: str = "") -> dict[str, float]:
        """:meth:`summary` under CleanRL's names: ``charts/[<game>/]<prefix>episodic_return`` etc."""
        row = {}
        for key, value in self.summary().items():
            game, _, stat = key.rpartition("/")
            name = {"return_mean": "episodic_return", "length_mean": "episodic_length"}.get(stat, stat)
            row[f"charts/{game + '/' if game else ''}{prefix}{name}"] = value
        return row

    def state_dict(self) -> dict:
        """The recent episodes, for a checkpoint (a resumed run logs the same moving windows)."""
        return {
            "returns": {g: list(d) for g, d in self.returns.items()},
            "lengths": {g: list(d) for g, d in self.lengths.items()},
            "completed": {g: list(d) for g, d in self.completed.items()},
            "total": self.total,
        }

    def load_state_dict(self, state: dict) -> None:
        for name in ("returns", "lengths", "completed"):
            for g, values in state[name].items():
                getattr(self, name)[g].extend(values)
        self.total = state["total"]
