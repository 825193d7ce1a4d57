"""The world model as a library: train_world_model, TrainedWorldModel, dream and evaluate_world_model, each
against what the commands write (wm sample's store, wm evaluate's evaluation.json) or a direct simulation."""

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from proclab.cli import main
from proclab.errors import ProclabError
from proclab.io.checkpoint import find_checkpoint
from proclab.io.results import Result
from proclab.run.runtime import RuntimeConfig
from proclab.store import EpisodeStore
from proclab.store.state_codec import StateCodec
from proclab.store.windows import WindowDataset
from proclab.worldmodel import (
    Dream,
    EvaluationSettings,
    TrainedWorldModel,
    WorldModelEvaluation,
    dream,
    dreamed,
    evaluate_world_model,
    train_world_model,
)
from proclab.worldmodel.command import EvaluateArgs
from proclab.worldmodel.sample import SamplingSettings, sample_rollouts
from support import round_trip


@pytest.fixture(scope="module")
def world(trained_run):
    return TrainedWorldModel.load(trained_run, "cpu")


def test_train_world_model_takes_a_store_and_a_size_and_returns_the_trained_model(
    store, make_config, tmp_path
):
    config = make_config()
    world = train_world_model(
        EpisodeStore(store), config, total_updates=2, run_root=tmp_path / "r", progress=False
    )
    assert world.updates == 2 and world.run_dir.parent.parent.parent.parent == tmp_path / "r"
    assert world.checkpoint.path == find_checkpoint(world.run_dir) and world.reward_field == "reward_norm"
    again = TrainedWorldModel.load(world.run_dir, "cpu")
    for name, value in again.model.state_dict().items():  # what it returns is what it saved
        torch.testing.assert_close(world.model.state_dict()[name], value, rtol=0, atol=0)
    assert not any(p.requires_grad for p in world.agent.parameters())
    with pytest.raises(
        ProclabError, match=r"WMTrainConfig has no field total_update; valid: .*total_updates"
    ):
        train_world_model(store, config, total_update=2)
    with pytest.raises(ProclabError, match="world-model preset"):
        train_world_model(store, "huge")


@pytest.mark.parametrize("init", ["informed", "random"])
def test_dream_gives_the_rows_wm_sample_writes(world, trained_run, tmp_path, init):
    out = sample_rollouts(
        trained_run,
        tmp_path / "s",
        SamplingSettings(n=5, steps=4, init=init, seed=3, batch_size=2, videos=0),
        RuntimeConfig(device="cpu", precision="fp32"),
        progress=False,
    )
    stored = EpisodeStore(out)
    dreams = dream(world, start=init, n=5, steps=4, seed=3, batch_size=2)  # batches as sampled: same sums
    assert isinstance(dreams, Dream) and len(dreams) == 5 and dreams.frames.shape == (5, 4, 3, 64, 64)
    codec = StateCodec(world.agent.state_shapes())
    for b in range(5):
        episode = stored.episode(b)
        row, info = dreams.episode(b, codec)
        assert set(row) <= set(episode.steps)  # the store derives state_in from state_out and state_in0
        for name, values in row.items():
            np.testing.assert_array_equal(values, episode.steps[name], err_msg=name)
        for name, value in info.items():  # bottleneck, return, final frame, the agent's first state
            np.testing.assert_array_equal(value, episode.info[name], err_msg=name)
        if init == "informed":
            assert dreams.source_episodes[b] == episode.info["source_episode"]
            assert dreams.source_offsets[b] == episode.info["source_offset"]
    if init == "random":  # the same vectors given back dream the same dreams
        again = dream(world, start=dreams.bottlenecks, steps=4, seed=3, batch_size=2)  # same sums
        np.testing.assert_array_equal(again.frames, dreams.frames)
        assert again.source_episodes.tolist() == [-1] * 5 and again.real_frames is None


def test_copy_real_frame_starts_the_dream_from_the_frame_before_the_window_ends(world, store):
    dreams = dream(world, n=3, steps=3, seed=1, copy_real_frame=True)
    windows = WindowDataset(store, world.model.config.num_init_steps, stride=1, fields=["obs"])
    picks = np.random.default_rng(1).choice(len(windows), 3, replace=False)
    real = torch.stack([windows[int(i)]["obs"] for i in picks])  # (3, n_init, 3, 64, 64)
    np.testing.assert_array_equal(dreams.real_frames, real.numpy())
    with torch.no_grad():
        traj = dreamed(
            world.model, world.agent, torch.from_numpy(dreams.bottlenecks), 4, start_frame=real[:, -2]
        )
    np.testing.assert_array_equal(dreams.frames, Dream.of(traj, 3, world.reward_field).frames)
    assert dreams.copied_real_frame
    with pytest.raises(ProclabError, match="copy_real_frame needs informed starts"):
        dream(world, start="random", copy_real_frame=True)
    with pytest.raises(ProclabError, match="start"):
        dream(world, start="somewhere")
    with pytest.raises(ProclabError, match=r"start vectors must be \(n, 8\)"):
        dream(world, start=np.zeros((2, 3)))


def test_a_dream_is_a_result_to_read_plot_save_and_load(world, tmp_path):
    dreams = dream(world, agent="always-right", n=3, steps=5)
    rows = dreams.table()
    assert [r["dream"] for r in rows] == [0, 1, 2] and all(len(r["actions"].split()) == 5 for r in rows)
    fig = dreams.plot(dreams=2, every=2)
    assert len(fig.axes) == 2 * (1 + 3)  # the real frame, then steps 0, 2, 4
    saved = dreams.save(tmp_path / "dream")
    arrays = np.load(saved / "arrays.npz")
    np.testing.assert_array_equal(arrays["frames"], dreams.frames)
    assert json.loads((saved / "result.json").read_text())["reward_field"] == "reward_norm"
    assert isinstance(dreams, Result)
    round_trip(dreams, tmp_path / "again")


def test_evaluate_world_model_is_what_wm_evaluate_writes(world, trained_run, store, tmp_path):
    settings = {"horizon": 3, "within": 2, "windows": 12, "reference_states": 50, "seed": 2}
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in settings.items()]
    main(["wm", "evaluate", str(trained_run), "--data", str(store), "--out", str(tmp_path / "ev"), *flags,
          "--device", "cpu", "--precision", "fp32"])  # fmt: skip
    result = evaluate_world_model(world, data=store, settings=EvaluationSettings(**settings), progress=False)
    assert isinstance(result, WorldModelEvaluation)
    assert json.loads((tmp_path / "ev" / "evaluation.json").read_text()) == json.loads(
        json.dumps(result.summary(), default=str)
    )
    table = result.table()
    assert [r["frames"] for r in table] == list(result.mse["mean"])
    assert table[0]["MSE k=1"] == result.mse["mean"]["teacher-forced"][0]["mean"]
    assert len(result.plot().axes) == 2
    json.dumps(result.to_dict(), allow_nan=False)  # JSON as the Result base writes it
    round_trip(result, tmp_path / "evaluation")
    with pytest.raises(ProclabError, match="--within"):
        evaluate_world_model(world, data=store, settings=EvaluationSettings(horizon=2, within=3))


def test_the_evaluation_settings_are_the_commands_flags(trained_run, store, tmp_path):
    args = EvaluateArgs(wm=trained_run, data=store, out=tmp_path / "x", horizon=3, within=2)
    assert replace(args, windows=7).windows == 7
    with pytest.raises(ProclabError, match="--horizon must be >= 1"):
        EvaluateArgs(wm=trained_run, data=store, horizon=0).check()
