"""Shared pieces of the episode-store and recording tests: tiny checkpoints, small stores, the CLI.

The fixtures are re-exported by `tests/store/conftest.py` and `tests/record/conftest.py` (a conftest is not
importable as a module, so the shared pieces live here)."""

from pathlib import Path

import numpy as np
import pytest

from proclab.envs import EnvConfig
from proclab.models import AgentConfig
from proclab.store import ShardWriter
from support import TINY_AGENT, proclab
from support import agent_checkpoint as save_test_checkpoint

REWARD_VAR = 4.0  # the running return variance written into test checkpoints: reward_norm = reward / 2


def make_checkpoint(path: Path, game: str = "bossfight", core: str = "gru", num_actions: int = 15) -> Path:
    """A trainer's checkpoint with a training state holding reward statistics."""
    agent = AgentConfig(core=core, rnn_size=8, num_actions=num_actions, **TINY_AGENT)
    state = {"ranks": [{"actor": {"env": {"reward_rms": {"mean": 0.0, "var": REWARD_VAR, "count": 10.0}}}}]}
    return save_test_checkpoint(path, agent, EnvConfig(game=(game,), num_envs=4), state)


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("ckpt") / "bossfight")


def synthetic_episode(length: int, tag: int, state_width: int = 2) -> tuple[dict, dict]:
    """An episode whose every value says where it belongs: row t of episode ``tag``."""
    t = np.arange(length)
    obs = np.zeros((length, 3, 64, 64), np.uint8)
    obs[:, 0, 0, 0], obs[:, 0, 0, 1] = t, tag
    steps = {
        "obs": obs,
        "value": (tag * 1000 + t).astype(np.float32),
        "action": t % 15,
        "terminated": t == length - 1,
        "state_out/core.0": np.stack([tag * 1000 + t + 1] * state_width, axis=1).astype(np.float32),
    }
    info = {
        "game": "coinrun" if tag % 2 else "bigfish",
        "return": float(tag),
        "level_seed": tag,
        "state_in0/core.0": np.full(state_width, -1, np.float32),
    }
    return steps, info


def write_store(path: Path, shards: list[list[int]], tags: list[list[int]] | None = None) -> Path:
    """A store with one shard per list of episode lengths; episode tags count up from 0 by default."""
    tag = 0
    for s, lengths in enumerate(shards):
        with ShardWriter(path, commit_seconds=0) as w:
            for k, length in enumerate(lengths):
                w.append(*synthetic_episode(length, tags[s][k] if tags else tag))
                tag += 1
    return path


# The helpers above, for the test modules (conftest is not importable as a module).
@pytest.fixture(scope="session")
def helpers():
    return _Helpers


class _Helpers:
    make_checkpoint = staticmethod(make_checkpoint)
    proclab = staticmethod(proclab)
    episode = staticmethod(synthetic_episode)
    write_store = staticmethod(write_store)
    REWARD_VAR = REWARD_VAR
