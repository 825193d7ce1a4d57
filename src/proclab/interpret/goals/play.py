"""Playing an agent on many mazes in batches and keeping only what each episode reached (the frames of a
batch are dropped once read), so that thousands of mazes fit in memory and a long run can resume by batch."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from proclab.interpret.goals.episodes import MazeEpisode, maze_episodes
from proclab.io.files import write_json
from proclab.record.rollout import rollout


def play_batch(agent, levels: str, index: int, batch: int, seed: int, greedy: bool, region: int = 5):
    """Batch ``index``: ``batch`` episodes on the split ``levels`` (distinct levels of a bounded split, drawn
    with ``seed + index``; procgen's draw on an unbounded one), actions seeded as ``proclab.rollout`` seeds
    them."""
    played = rollout(
        agent, "maze", levels, episodes=batch, num_envs=batch, greedy=greedy, seed=seed + index, truth=True
    )
    return maze_episodes(played, region)


def play_mazes(
    agent,
    levels: str,
    episodes: int,
    *,
    batch: int = 32,
    seed: int = 0,
    greedy: bool = False,
    region: int = 5,
    folder: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[MazeEpisode]:
    """``episodes`` episodes (rounded up to whole batches) of ``agent`` on ``levels``; with ``folder``, each
    batch is kept there as ``batch_<k>.json`` and a batch already there is read instead of played (resume)."""
    batches = -(-episodes // batch)
    out: list[MazeEpisode] = []
    for k in range(batches):
        path = None if folder is None else Path(folder) / f"batch_{k:05d}.json"
        if path is not None and path.is_file():
            kept = json.loads(path.read_text())
            if (kept["batch"], kept["seed"], kept["levels"], kept["greedy"]) == (batch, seed, levels, greedy):
                out += [MazeEpisode(**e) for e in kept["episodes"]]
                if progress:
                    progress(k + 1, batches)
                continue
        got = play_batch(agent, levels, k, batch, seed, greedy, region)
        if path is not None:
            kept = {"levels": levels, "batch": batch, "seed": seed, "greedy": greedy}
            write_json(path, {**kept, "episodes": [dataclasses.asdict(e) for e in got]})
        out += got
        if progress:
            progress(k + 1, batches)
    return out
