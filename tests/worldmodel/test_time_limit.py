"""`wm train --time-limit`: training stops after the update that crosses the budget, with a checkpoint."""

from dataclasses import replace

import torch
from safetensors.torch import load_file

from proclab.cli import main as cli
from proclab.io.checkpoint import find_checkpoint
from proclab.io.run_dirs import read_metrics
from proclab.worldmodel.trainer import WMTrainer, train_world_model


def test_a_time_limit_stops_after_the_first_update_that_crosses_it(make_config):
    run = train_world_model(
        make_config().data, make_config(), total_updates=1000, time_limit=0.001, progress=False
    ).run_dir
    assert (
        [p.name for p in (run / "checkpoints").iterdir()] == [find_checkpoint(run).name] == ["step_00000001"]
    )


def test_sessions_stopped_by_the_time_limit_add_up_to_an_uninterrupted_run(make_config, tmp_path, capsys):
    """Two sessions cut by --time-limit after one update each, then `--resume --time-limit 0` to the end:
    the final weights and the logged losses equal an uninterrupted run's, and each update is logged once."""
    cfg = make_config(window_stride=64, total_updates=5)  # 3 batches per epoch
    full = WMTrainer(replace(cfg, name="full")).train(progress=False)
    part = WMTrainer(replace(cfg, name="part", time_limit=0.001)).train(progress=False)
    WMTrainer(replace(cfg, name="part", time_limit=0.001), run_dir=part, resume=True).train(progress=False)
    assert find_checkpoint(part).name == "step_00000002"  # each session: one update, then its checkpoint
    cli(["wm", "train", "--resume", str(part), "--time-limit", "0"])
    assert "h of training (all sessions)" in capsys.readouterr().out

    def last(run):
        return load_file(str(run / "checkpoints" / "step_00000005" / "model.safetensors"))

    a, b = last(full), last(part)
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])]
    assert read_metrics(part)["step"] == [1, 2, 3, 4, 5]
    assert read_metrics(part)["losses/total"] == read_metrics(full)["losses/total"]
    wall = read_metrics(part)["wall_time"]
    assert wall == sorted(wall)  # training time adds up across sessions: it never restarts from 0
