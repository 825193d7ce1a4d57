"""Tiny fixtures of the interpretation tests: a GRU agent's recording, a world model, its samples."""

from pathlib import Path

import pytest

from proclab.worldmodel.sample import SampleArgs, sample_rollouts
from worldmodel.conftest import make_agent_checkpoint, record, tiny_config


@pytest.fixture(scope="session")
def wm_run(tmp_path_factory) -> Path:
    """A tiny world model trained for a few updates on two episodes of a tiny GRU agent."""
    from proclab.worldmodel.train import train_world_model

    root = tmp_path_factory.mktemp("interpret")
    store = record(make_agent_checkpoint(root / "gru"), root / "coinrun.zarr")
    return train_world_model(tiny_config(store, root / "runs", total_updates=2), progress=False)


@pytest.fixture(scope="session")
def samples(wm_run, tmp_path_factory) -> Path:
    """Five modal, greedy samples of six steps (how saliency wants them)."""
    out = tmp_path_factory.mktemp("samples") / "samples.zarr"
    return sample_rollouts(SampleArgs(checkpoint=wm_run, out=out, n=5, steps=6, init="random", videos=0,
                                      device="cpu", torch_threads=1), progress=False)  # fmt: skip
