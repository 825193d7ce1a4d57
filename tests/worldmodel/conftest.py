"""Shared pieces of the world-model tests: a tiny recurrent agent, a small recorded store, tiny configs."""

from pathlib import Path

import pytest

from proclab.worldmodel.config import WMTrainConfig
from support import make_agent_checkpoint, record, tiny_config


@pytest.fixture(scope="session")
def agent_checkpoint(tmp_path_factory) -> Path:
    return make_agent_checkpoint(tmp_path_factory.mktemp("agent") / "gru")


@pytest.fixture(scope="session")
def store(tmp_path_factory, agent_checkpoint) -> Path:
    """Two coinrun episodes played by the tiny GRU agent, recorded by `proclab record`'s code."""
    return record(agent_checkpoint, tmp_path_factory.mktemp("data") / "coinrun.zarr")


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, store) -> Path:
    """A tiny world model trained for a few updates (enough to sample from and evaluate)."""
    from proclab.worldmodel.trainer import train_world_model

    return train_world_model(
        store, tiny_config(store, tmp_path_factory.mktemp("runs"), total_updates=3), progress=False
    ).run_dir


@pytest.fixture
def make_config(store, tmp_path):
    """``make_config(**overrides)``: the tiny training config on the session's store, runs under tmp_path."""

    def make(**overrides) -> WMTrainConfig:
        return tiny_config(store, tmp_path / "runs", **overrides)

    return make


@pytest.fixture(scope="session")
def helpers():
    """The shared helpers (tests/support.py) the world-model tests take as a fixture."""
    return _Helpers


class _Helpers:
    make_agent_checkpoint = staticmethod(make_agent_checkpoint)
    tiny_config = staticmethod(tiny_config)
