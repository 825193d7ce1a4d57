"""The saliency and generative-visualisation tests again, unchanged, on a world model with the ``cpu``
preset's forms (copy path, camera shift, changed-pixel loss): the analyses on dreams must run on it."""

import importlib.util
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from proclab.models.loading import freeze
from proclab.run.runtime import make_runtime
from proclab.store import EpisodeStore
from proclab.worldmodel.checkpoint import load_world_model
from proclab.worldmodel.config import wm_size
from proclab.worldmodel.sample import SampleArgs, sample_rollouts
from support import make_agent_checkpoint, tiny_config
from support import record as record_coinrun


def _tests_of(name: str):
    spec = importlib.util.spec_from_file_location(f"copy_path_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_saliency, _visualize = _tests_of("test_saliency"), _tests_of("test_visualize")
basis = _saliency.basis
for _module in (_saliency, _visualize):
    for _name in dir(_module):
        if _name.startswith("test_") and not _name.startswith("test_real") and _name != "test_target_grammar":
            globals()[_name] = getattr(_module, _name)


@pytest.fixture(scope="module")
def wm_run(tmp_path_factory) -> Path:
    """The tiny world model with the cpu preset's forms, trained for a few updates on two coinrun episodes."""
    from proclab.worldmodel.train import train_world_model

    root = tmp_path_factory.mktemp("copy_path")
    store = record_coinrun(make_agent_checkpoint(root / "gru"), root / "coinrun.zarr")
    tiny, cpu = wm_size("tiny"), wm_size("cpu")
    model = replace(tiny.model, decoder_copy=True, camera_shift=cpu.model.camera_shift)
    config = tiny_config(store, root / "runs", total_updates=2, model=model, loss=cpu.loss)
    return train_world_model(config, progress=False)


@pytest.fixture(scope="module")
def samples(wm_run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("copy_samples") / "samples.zarr"
    return sample_rollouts(
        SampleArgs(
            checkpoint=wm_run, out=out, n=5, steps=6, init="random", videos=0, device="cpu", torch_threads=1
        ),
        progress=False,
    )


@pytest.fixture(scope="module")
def model(wm_run):
    wm, agent, _ = load_world_model(wm_run, make_runtime("cpu", "fp32", 1))
    assert wm.config.decoder_copy and wm.shift is not None
    return freeze(wm), agent


@pytest.fixture(scope="module")
def bottlenecks(samples):
    store = EpisodeStore(samples)
    return torch.from_numpy(np.stack([store.info(i)["bottleneck"] for i in range(3)])).float()
