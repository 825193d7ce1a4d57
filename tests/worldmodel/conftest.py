"""Shared pieces of the world-model tests: a tiny recurrent agent, a small recorded store, tiny configs."""

from dataclasses import replace
from pathlib import Path

import pytest

from proclab.data import RecordArgs, new_recording, record_shard
from proclab.envs import EnvConfig
from proclab.models import AgentConfig
from proclab.worldmodel.config import WMTrainConfig, wm_size
from support import TINY_AGENT
from support import agent_checkpoint as save_test_checkpoint

TINY_GRU = AgentConfig(core="gru", rnn_size=16, head_init="torch", **TINY_AGENT)


def make_agent_checkpoint(path: Path, agent: AgentConfig = TINY_GRU, game: str = "coinrun") -> Path:
    """A trainer's checkpoint of a freshly initialised agent."""
    return save_test_checkpoint(path, agent, EnvConfig(game=(game,), num_envs=2, use_backgrounds=False))


def record(checkpoint: Path, out: Path, episodes: int = 2, seed: int = 0) -> Path:
    recording = new_recording(
        RecordArgs(checkpoint=checkpoint, out=out, episodes=episodes, num_envs=2, seed=seed)
    )
    record_shard(recording, out, episodes, device="cpu", precision="fp32", torch_threads=1)
    return out


@pytest.fixture(scope="session")
def agent_checkpoint(tmp_path_factory) -> Path:
    return make_agent_checkpoint(tmp_path_factory.mktemp("agent") / "gru")


@pytest.fixture(scope="session")
def store(tmp_path_factory, agent_checkpoint) -> Path:
    """Two coinrun episodes played by the tiny GRU agent, recorded by `proclab record`'s code."""
    return record(agent_checkpoint, tmp_path_factory.mktemp("data") / "coinrun.zarr")


def tiny_config(store: Path, run_root: Path, **overrides) -> WMTrainConfig:
    base = wm_size("tiny")
    return replace(base, data=store, run_root=run_root, device="cpu", precision="fp32", tensorboard=False,
                   torch_threads=1, **overrides)  # fmt: skip


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, store) -> Path:
    """A tiny world model trained for a few updates (enough to sample from and evaluate)."""
    from proclab.worldmodel.train import train_world_model

    return train_world_model(
        tiny_config(store, tmp_path_factory.mktemp("runs"), total_updates=3), progress=False
    )


@pytest.fixture
def make_config(store, tmp_path):
    """``make_config(**overrides)``: the tiny training config on the session's store, runs under tmp_path."""

    def make(**overrides) -> WMTrainConfig:
        return tiny_config(store, tmp_path / "runs", **overrides)

    return make


@pytest.fixture(scope="session")
def helpers():
    """The helpers above, for the test modules (conftest is not importable as a module)."""
    return _Helpers


class _Helpers:
    make_agent_checkpoint = staticmethod(make_agent_checkpoint)
    tiny_config = staticmethod(tiny_config)
