"""Tiny recorded stores for the interpretation tests: a GRU, an LSTM and a feed-forward agent."""

from pathlib import Path

import pytest

from proclab.cli import main
from proclab.envs import EnvConfig
from proclab.models import AgentConfig
from support import TINY_AGENT, agent_checkpoint

THREADS = ["--torch-threads", "1"]


def record(tmp: Path, core: str, episodes: int = 6, **agent) -> Path:
    """A freshly initialised agent of ``core`` recorded for a few bossfight episodes."""
    config = AgentConfig(core=core, rnn_size=16, **TINY_AGENT, **agent)
    ckpt = agent_checkpoint(tmp / "run", config, EnvConfig(game=("bossfight",), num_envs=3))
    store = tmp / "DATA"
    main(["record", str(ckpt), "--episodes", str(episodes), "--num-envs", "3", "--out", str(store), *THREADS])
    return store


@pytest.fixture(scope="session")
def gru_store(tmp_path_factory) -> Path:
    return record(tmp_path_factory.mktemp("gru"), "gru")


@pytest.fixture(scope="session")
def lstm_store(tmp_path_factory) -> Path:
    return record(tmp_path_factory.mktemp("lstm"), "lstm", episodes=3, prev_reward=True)


@pytest.fixture(scope="session")
def ff_store(tmp_path_factory) -> Path:
    return record(tmp_path_factory.mktemp("ff"), "none", episodes=3)
