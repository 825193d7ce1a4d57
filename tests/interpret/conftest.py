"""Tiny stores for the interpretation tests: recordings of a GRU, an LSTM and a feed-forward agent; a tiny
world model trained on a GRU agent's recording and its (modal, greedy) samples."""

from pathlib import Path

import numpy as np
import pytest
import torch

from proclab.cli import main
from proclab.envs import EnvConfig
from proclab.models import AgentConfig
from proclab.models.loading import freeze
from proclab.run.runtime import make_runtime
from proclab.store import EpisodeStore
from proclab.worldmodel.checkpoint import load_world_model
from proclab.worldmodel.sample import SampleArgs, sample_rollouts
from support import TINY_AGENT, agent_checkpoint, make_agent_checkpoint, tiny_config, write_samples
from support import record as record_coinrun

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


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory) -> Path:
    return write_samples(tmp_path_factory.mktemp("samples") / "SAMPLES")


@pytest.fixture(scope="session")
def wm_run(tmp_path_factory) -> Path:
    """A tiny world model trained for a few updates on two coinrun episodes of a tiny GRU agent."""
    from proclab.worldmodel.train import train_world_model

    root = tmp_path_factory.mktemp("interpret")
    store = record_coinrun(make_agent_checkpoint(root / "gru"), root / "coinrun.zarr")
    return train_world_model(tiny_config(store, root / "runs", total_updates=2), progress=False)


@pytest.fixture(scope="session")
def samples(wm_run, tmp_path_factory) -> Path:
    """Five modal, greedy samples of six steps of that world model (what saliency re-simulates)."""
    out = tmp_path_factory.mktemp("samples") / "samples.zarr"
    return sample_rollouts(
        SampleArgs(
            checkpoint=wm_run, out=out, n=5, steps=6, init="random", videos=0, device="cpu", torch_threads=1
        ),
        progress=False,
    )


@pytest.fixture(scope="module")
def model(wm_run):
    """The tiny world model and its agent, frozen, fp32 on the CPU."""
    wm, agent, _ = load_world_model(wm_run, make_runtime("cpu", "fp32", 1))
    return freeze(wm), agent


@pytest.fixture(scope="module")
def bottlenecks(samples):
    """The stored bottleneck vectors of the first three samples."""
    store = EpisodeStore(samples)
    return torch.from_numpy(np.stack([store.info(i)["bottleneck"] for i in range(3)])).float()
