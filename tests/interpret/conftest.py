"""Tiny stores for the interpretation tests: recordings of a GRU, an LSTM and a feed-forward agent; a tiny
world model trained on a GRU agent's recording and its (modal, greedy) samples."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from proclab.cli import main
from proclab.envs import EnvConfig
from proclab.models import AgentConfig
from proclab.models.loading import freeze
from proclab.run.runtime import RuntimeConfig, make_runtime
from proclab.store import EpisodeStore
from proclab.worldmodel.checkpoint import load_world_model
from proclab.worldmodel.config import wm_size
from proclab.worldmodel.sample import SamplingSettings, sample_rollouts
from proclab.worldmodel.trainer import train_world_model
from support import TINY_AGENT, agent_checkpoint, make_agent_checkpoint, tiny_config, write_samples
from support import record as record_coinrun

THREADS = ["--torch-threads", "1"]


def record(tmp: Path, core: str, episodes: int = 6, **agent) -> Path:
    """A freshly initialised agent of ``core`` recorded for a few bossfight episodes."""
    config = AgentConfig(core=core, rnn_size=16, **TINY_AGENT, **agent)
    ckpt = agent_checkpoint(tmp / "run", config, EnvConfig(game=("bossfight",), num_envs=3))
    store = tmp / "DATA"
    main(
        [
            "record",
            "--agent",
            str(ckpt),
            "--precision",
            "fp32",
            "--episodes",
            str(episodes),
            "--num-envs",
            "3",
            "--out",
            str(store),
            *THREADS,
        ]
    )
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


def forms(name: str) -> dict:
    """World-model config fields of a set of forms: ``tiny`` (the tiny preset as it is) or ``cpu`` (the cpu
    preset's copy path, camera shift and motion, gate bias and losses on the tiny model)."""
    if name == "tiny":
        return {}
    tiny, cpu = wm_size("tiny"), wm_size(name)
    copy_path = ("decoder_copy", "camera_shift", "camera_motion", "copy_gate_bias")
    return {
        "model": replace(tiny.model, **{k: getattr(cpu.model, k) for k in copy_path}),
        "loss": cpu.loss,
    }


@pytest.fixture(scope="session")
def world_models(tmp_path_factory):
    """``world_models(forms)``: a tiny world model with those :func:`forms`, trained for a few updates on two
    coinrun episodes of a tiny GRU agent, and five modal, greedy samples of six steps of it (what saliency
    re-simulates): ``(run, samples)``, made once per session and forms."""
    made: dict[str, tuple[Path, Path]] = {}

    def make(name: str) -> tuple[Path, Path]:
        if name not in made:
            root = tmp_path_factory.mktemp(f"wm-{name}")
            store = record_coinrun(make_agent_checkpoint(root / "gru"), root / "coinrun.zarr")
            config = tiny_config(store, root / "runs", total_updates=2, **forms(name))
            run = train_world_model(store, config, progress=False).run_dir
            samples = sample_rollouts(
                run,
                root / "samples.zarr",
                SamplingSettings(n=5, steps=6, init="random", videos=0),
                RuntimeConfig(device="cpu", precision="fp32", torch_threads=1),
                progress=False,
            )
            made[name] = run, samples
        return made[name]

    return make


@pytest.fixture(scope="module")
def wm_forms() -> str:
    """The forms of this module's world model (a test module overrides it to run its tests on others)."""
    return "tiny"


@pytest.fixture(scope="module")
def wm_run(world_models, wm_forms) -> Path:
    return world_models(wm_forms)[0]


@pytest.fixture(scope="module")
def samples(world_models, wm_forms) -> Path:
    return world_models(wm_forms)[1]


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
