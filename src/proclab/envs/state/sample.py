"""Game states from random levels at random points of episodes, for tests, benchmarks and probes."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from proclab.envs._procgen import ProcgenBackend
from proclab.envs.actions import NUM_ACTIONS
from proclab.envs.games import check_game


def random_states(
    game: str, mode: str, count: int, seed: int = 0, num_envs: int = 4, keep_prob: float = 0.05
) -> Iterator[bytes]:
    """``count`` raw states of ``game`` in ``mode``: ``num_envs`` envs on unbounded random levels play
    uniformly random actions, and after each step every env's state is kept with ``keep_prob``, so the
    states fall at random points of episodes (first frames and episode ends included)."""
    check_game(game, mode)
    rng = np.random.default_rng(seed)
    levels = {"num_levels": 0, "start_level": int(rng.integers(2**31 - 1))}
    if mode == "exploration":  # procgen fixes the levels of exploration mode itself
        levels = {}
    backend = ProcgenBackend(
        num_envs, game, distribution_mode=mode, rand_seed=int(rng.integers(2**31 - 1)), **levels
    )
    try:
        produced = 0
        while produced < count:
            backend.act(rng.integers(0, NUM_ACTIONS, num_envs).astype(np.int32))
            keep = rng.random(num_envs) < keep_prob
            if keep.any():
                states = backend.get_state()
                for i in np.flatnonzero(keep)[: count - produced]:
                    yield states[i]
                    produced += 1
    finally:
        backend.close()
