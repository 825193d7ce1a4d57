"""`proclab wm train`: it learns, resumes exactly, is self-contained, and runs under torchrun."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from torch.utils.data import default_collate

from proclab.cli import main as cli
from proclab.io.run_dirs import read_metrics
from proclab.run.runtime import make_runtime
from proclab.worldmodel.checkpoint import load_world_model
from proclab.worldmodel.config import wm_size
from proclab.worldmodel.trainer import WMTrainer
from support import torchrun_proclab


def weights(run: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(str(run / "checkpoints" / f"step_{step:08d}" / "model.safetensors"))


def overfit(trainer: WMTrainer, windows: list[int], updates: int) -> list[float]:
    items = default_collate([trainer.dataset[i] for i in windows])
    return [float(trainer.update(items)["losses/total"]) for _ in range(updates)]


def test_loss_on_a_couple_of_windows_falls_by_a_large_factor(make_config):
    trainer = WMTrainer(make_config(learning_rate=3e-3))
    losses = overfit(trainer, [0, len(trainer.dataset) // 2], 60)
    assert losses[-1] < losses[0] / 5, losses[::10]


def test_the_policy_term_trains_on_a_recorded_store(make_config):
    cfg = make_config()
    trainer = WMTrainer(replace(cfg, loss=replace(cfg.loss, policy_kl=5.0)))
    assert trainer.dataset[0]["logits_clean"] is not None  # proclab record keeps the agent's logits
    metrics = trainer.update(default_collate([trainer.dataset[i] for i in (0, 1)]))
    assert float(metrics["losses/policy_kl"]) > 0


@pytest.mark.slow
def test_small_model_overfits_a_tiny_store(store, make_config):
    """The `small` size on a few windows of a real recording: the loss falls by more than 10x."""
    small = wm_size("small")
    trainer = WMTrainer(make_config(model=small.model, batch_size=4, learning_rate=small.learning_rate))
    losses = overfit(trainer, [0, 40, 200, 400], 250)
    assert losses[-1] < losses[0] / 10, losses[::25]


def test_killed_run_resumes_to_identical_weights(make_config):
    """Stopped in the middle of its second epoch and resumed two updates further: bit-identical to an
    uninterrupted run."""
    cfg = make_config(window_stride=64, checkpoint_every=1)  # a few windows: batches of 4, the rest dropped
    per_epoch = WMTrainer(replace(cfg, name="count")).sampler.batches
    stop, end = per_epoch + 1, per_epoch + 3
    full = WMTrainer(replace(cfg, total_updates=end, name="full")).train(progress=False)
    part = WMTrainer(replace(cfg, total_updates=stop, name="part")).train(progress=False)
    resumed = WMTrainer(replace(cfg, total_updates=end, name="part"), run_dir=part, resume=True)
    assert (resumed.updates, resumed.epoch, resumed.position) == (stop, 1, 1)
    resumed.train(progress=False)
    a, b = weights(full, end), weights(part, end)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])]
    assert not all(torch.equal(a[k], weights(part, stop)[k]) for k in a)  # it did train after resuming
    steps = read_metrics(part)["step"]
    assert steps == list(range(1, end + 1))  # each update logged exactly once
    assert read_metrics(part)["losses/total"] == read_metrics(full)["losses/total"]


def cpu_run_flags(run_root: Path) -> list[str]:
    """``proclab wm train`` flags for a quiet, single-threaded, exact CPU run under ``run_root``."""
    return [
        "--run-root",
        str(run_root),
        "--device",
        "cpu",
        "--precision",
        "fp32",
        "--no-tensorboard",
        "--torch-threads",
        "1",
    ]


def test_command_line_run_is_self_contained(store, agent_checkpoint, tmp_path, capsys):
    agent = shutil.copytree(agent_checkpoint, tmp_path / "agent")
    flags = ["--data", str(store), "--agent", str(agent), *cpu_run_flags(tmp_path / "runs")]
    cli(["wm", "train", "--preset", "tiny", "--total-updates", "2", "--video-samples", "2", *flags])
    run = Path(capsys.readouterr().out.strip().splitlines()[-1].removeprefix("run directory: "))
    assert json.loads((run / "config.json").read_text())["size"] == "tiny"
    assert (run / "videos" / "step_00000002.mp4").stat().st_size > 0
    meta = json.loads((run / "checkpoints" / "step_00000002" / "meta.json").read_text())
    assert meta["kind"] == "world_model" and meta["agent_source"]["path"] == str(agent)

    shutil.rmtree(agent)  # the world model carries its agent
    wm, loaded, _ = load_world_model(run, make_runtime("cpu", "fp32"))
    source = load_file(str(agent_checkpoint / "model.safetensors"))
    assert all(torch.equal(loaded.state_dict()[k].cpu(), v) for k, v in source.items())
    assert not any(p.requires_grad for p in loaded.parameters()) and wm.codec.width == 16
    cli(["wm", "train", "--resume", str(run), "--total-updates", "3"])
    assert read_metrics(run)["step"] == [1, 2, 3]

    for argv, message in [
        (["--preset", "tinyy"], "unknown world-model preset 'tinyy'. Did you mean 'tiny'"),
        (["--resume", str(run), "--learning-rate", "1"], "only --total-updates may change"),
        (["--preset", "tiny", "--batch-size", "100000", *flags[:2], *flags[4:]], "fewer than one batch"),
        (["--preset", "tiny", *flags], "agent' does not exist"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            cli(["wm", "train", *argv])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and message in err and err.count("\n") == 1, err
    assert len(list((tmp_path / "runs").glob("wm/*/*/*"))) == 1  # refused runs leave nothing behind


@pytest.mark.distributed
def test_torchrun_two_cpu_processes(store, tmp_path):
    proc = torchrun_proclab(
        "wm",
        "train",
        "--preset",
        "tiny",
        "--data",
        str(store),
        "--total-updates",
        "3",
        *cpu_run_flags(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = tmp_path.glob("wm/*/*/*")
    assert read_metrics(run)["step"] == [1, 2, 3]
    state = torch.load(run / "checkpoints" / "step_00000003" / "train_state.pt", weights_only=True)
    assert len(state["ranks"]) == 2


def test_a_stateless_agent_end_to_end(tmp_path, helpers):
    """A feed-forward agent (quickstart's): no agent state anywhere, train -> sample -> loss over time."""
    from proclab.models import AgentConfig
    from proclab.run.runtime import RuntimeConfig
    from proclab.store import EpisodeStore, ShardWriter
    from proclab.worldmodel.loss_over_time import LossOverTimeSettings, loss_over_time
    from proclab.worldmodel.sample import SamplingSettings, sample_rollouts
    from support import TINY_AGENT

    agent = helpers.make_agent_checkpoint(
        tmp_path / "ff", AgentConfig(core="none", **TINY_AGENT), game="starpilot"
    )
    rng = np.random.default_rng(0)
    with ShardWriter(tmp_path / "data.zarr", commit_seconds=0) as w:
        for length in (9, 12):
            w.append(
                {
                    "obs": rng.integers(0, 256, (length, 3, 64, 64), np.uint8),
                    "action": rng.integers(0, 15, length),
                    "reward_norm": rng.random(length, np.float32),
                    "terminated": np.arange(length) == length - 1,
                    "logits_clean": rng.random((length, 15), np.float32),
                    "value": rng.random(length, np.float32),
                },
                {"game": "starpilot"},
            )
    cfg = replace(
        helpers.tiny_config(tmp_path / "data.zarr", tmp_path / "runs", total_updates=2), agent=agent
    )
    run = WMTrainer(cfg).train(progress=False)
    assert read_metrics(run)["losses/agent_state"] == [0.0, 0.0]
    cpu = RuntimeConfig(device="cpu")
    samples = sample_rollouts(
        run, tmp_path / "s", SamplingSettings(n=2, steps=3, videos=0), cpu, progress=False
    )
    assert not any(f.startswith("state_") for f in EpisodeStore(samples).fields)
    lot = loss_over_time(
        run, tmp_path / "lot", LossOverTimeSettings(batches=1, batch_size=2), cpu, progress=False
    )
    assert "agent_state" not in lot["quantities"] and "value" in lot["quantities"]


def test_kill_9_then_resume_is_bit_identical(make_config, store, tmp_path):
    """`proclab wm train` killed with SIGKILL after its 2nd update's checkpoint, then `--resume`: the
    final weights equal an uninterrupted run's bit for bit, and each update is logged once."""
    from support import proclab_killed_when

    full = WMTrainer(make_config(window_stride=64, checkpoint_every=2, total_updates=6)).train(progress=False)
    flags = ["--preset", "tiny", "--data", str(store), "--window-stride", "64", "--checkpoint-every", "2"]
    flags += ["--total-updates", "6", "--num-workers", "0", "--video-every", "0", "--video-samples", "0"]
    step_2 = "killed/wm/*/*/*/checkpoints/step_00000002"
    proclab_killed_when(step_2, tmp_path, "wm", "train", *flags, *cpu_run_flags(tmp_path / "killed"))
    (run,) = tmp_path.glob("killed/wm/*/*/*")
    assert not (run / "checkpoints" / "step_00000006").exists(), "the run finished before the kill"
    cli(["wm", "train", "--resume", str(run)])
    a, b = weights(full, 6), weights(run, 6)
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])]
    assert read_metrics(run)["step"] == list(range(1, 7))


def test_resume_of_a_finished_run_does_nothing_and_more_updates_are_recorded(store, tmp_path, capsys):
    flags = ["--preset", "tiny", "--data", str(store), "--video-samples", "0", *cpu_run_flags(tmp_path)]
    cli(["wm", "train", "--total-updates", "2", *flags])
    run = Path(capsys.readouterr().out.strip().splitlines()[-1].removeprefix("run directory: "))
    cli(["wm", "train", "--resume", str(run)])
    out = capsys.readouterr().out
    assert "already finished (last checkpoint at 2 of 2)" in out and out.count("\n") == 1, out
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_00000002"]
    cli(["wm", "train", "--resume", str(run), "--total-updates", "3"])
    assert json.loads((run / "config.json").read_text())["total_updates"] == 3
    (entry,) = [json.loads(line) for line in (run / "config_history.jsonl").read_text().splitlines()]
    assert entry["resumed_at_step"] == 2 and entry["changed"] == {"total_updates": [2, 3]}
    assert read_metrics(run)["step"] == [1, 2, 3]


def test_a_full_disk_at_a_checkpoint_is_one_line_and_resume_continues(store, tmp_path, capsys):
    """The disk fills up at the second checkpoint: exit 2, one line naming it, no temporary; once
    space is back, --resume continues from the first checkpoint to the end."""
    from support import disk_full

    flags = ["--preset", "tiny", "--data", str(store), "--video-samples", "0", "--checkpoint-every", "2"]
    cli(["wm", "train", *flags, "--total-updates", "2", *cpu_run_flags(tmp_path)])
    run = Path(capsys.readouterr().out.strip().splitlines()[-1].removeprefix("run directory: "))
    with disk_full(run / "checkpoints"), pytest.raises(SystemExit) as exit_:
        cli(["wm", "train", "--resume", str(run), "--total-updates", "4"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1, err
    assert f"cannot write checkpoint {str(run / 'checkpoints' / 'step_00000004')!r}" in err, err
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_00000002"]
    cli(["wm", "train", "--resume", str(run)])
    assert read_metrics(run)["step"] == [1, 2, 3, 4]
