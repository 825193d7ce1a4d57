"""Recorded episodes' first game states as a level-state file (``proclab level export``).

``proclab record`` stores each episode's first state (the ``initial_state`` blob of the store); ``level export``
writes those of the chosen episodes into one level-state file, so that a recorded episode
can be shown (``proclab level show``), edited (``proclab level edit``) or played again by any agent
(``--levels-from``): procgen continues from a state exactly as it did when the episode was recorded.
"""

from __future__ import annotations

from proclab.errors import ProclabError
from proclab.levels.file import MODE_CODES, LevelState, LevelStates, level_states
from proclab.store import EpisodeStore
from proclab.store.schema import INITIAL_STATE, has_first_states


def _mode(store: EpisodeStore, index: int) -> str:
    """The distribution mode episode ``index`` was recorded in (from its recording's settings)."""
    shard = store.shards[int(store.episodes["shard"][index])]
    mode = (shard.attrs.get("recording") or {}).get("mode")
    if mode not in MODE_CODES:
        raise ProclabError(
            f"episode {index} of {str(store.path)!r} has no recorded mode; it was not made by proclab record"
        )
    return mode


def initial_states(store: EpisodeStore, episodes: list[int]) -> LevelStates:
    """The first game states of ``episodes`` (all of one game and mode), checked, in the given order."""
    if not has_first_states(store):
        raise ProclabError(
            f"episode store {str(store.path)!r} holds no first game states: it was recorded with "
            "--no-ground-truth or before proclab stored them"
        )
    n = store.num_episodes
    bad = [i for i in episodes if not -n <= i < n]
    if bad:
        raise ProclabError(f"episode {bad[0]} is not in {str(store.path)!r}, which holds {n} episodes")
    episodes = [i % n for i in episodes]
    kinds = {(str(store.episodes["game"][i]), _mode(store, i)) for i in episodes}
    if len(kinds) > 1:
        raise ProclabError(
            f"a level-state file holds one game and mode; the episodes chosen are of {sorted(kinds)}: choose with --episode"
        )
    ((game, mode),) = kinds
    states = [
        LevelState(
            store.read_blob(INITIAL_STATE, i),
            int(store.episodes["level_seed"][i]),
            f"{store.path} episode {i}",
        )
        for i in episodes
    ]
    return level_states(game, mode, states)
