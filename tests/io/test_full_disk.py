"""A full disk: one line naming the file, exit 2, no temporaries left, earlier files intact, and a run
that stopped on it resumes from its last complete checkpoint (a real tmpfs where one can be mounted,
a simulated ENOSPC elsewhere)."""

import json
from pathlib import Path

import pytest
import torch

from proclab.cli import main
from proclab.io.checkpoint import load_checkpoint, save_checkpoint
from proclab.io.files import DiskFullError, write_json
from proclab.io.run_dirs import read_metrics
from support import TINY_FLAGS, TINY_PPO, disk_full, fill_disk, tmpfs

TINY = [*TINY_PPO, "--val-num-envs", "2", "--device", "cpu", "--no-tensorboard", *TINY_FLAGS]


def visible_and_hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_replaced_file_survives_a_full_disk_whole(tmp_path):
    path = write_json(tmp_path / "table.json", {"version": 1})
    with disk_full(tmp_path), pytest.raises(DiskFullError) as err:
        write_json(path, {"version": 2, "rows": list(range(1000))})
    assert str(path) in str(err.value) and "No space left on device" in str(err.value)
    assert "\n" not in str(err.value)
    assert json.loads(path.read_text()) == {"version": 1}
    assert visible_and_hidden(tmp_path) == ["table.json"]  # the temporary is gone


def test_a_checkpoint_on_a_full_disk_leaves_the_previous_one_loadable(tmp_path):
    weights = {"w": torch.arange(10.0)}
    first = save_checkpoint(tmp_path / "checkpoints" / "step_1", weights, {"step": 1}, {"opt": torch.ones(3)})
    with (
        disk_full(tmp_path, after=100),
        pytest.raises(DiskFullError, match=r"cannot write checkpoint .*step_2"),
    ):
        save_checkpoint(tmp_path / "checkpoints" / "step_2", weights, {"step": 2}, {"opt": torch.ones(3)})
    assert visible_and_hidden(tmp_path / "checkpoints") == ["step_1"]
    assert load_checkpoint(tmp_path, train_state=True).path == first.resolve()


@pytest.mark.heavy
def test_train_on_a_full_tmpfs_stops_in_one_line_and_resumes_once_space_is_freed(tmp_path, capsys):
    """A real file system that fills up during `proclab train`: exit 2 with one line naming the checkpoint,
    no temporary directory, the earlier checkpoints load, and --resume finishes the run afterwards."""
    with tmpfs(tmp_path / "disk", "16m") as disk:
        main(["train", *TINY, "--total-steps", "256", "--checkpoint-every", "128", "--run-root", str(disk)])
        (run,) = disk.glob("ppo/*/*/*")
        size = sum(f.stat().st_size for f in (run / "checkpoints" / "step_000000000256").iterdir())
        filler = fill_disk(disk, leave=size // 2)
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_:
            main(["train", "--resume", str(run), "--total-steps", "512"])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert "cannot write" in err and "No space left on device" in err and str(run) in err, err
        assert visible_and_hidden(run / "checkpoints") == ["step_000000000128", "step_000000000256"]
        assert load_checkpoint(run, kind="agent", train_state=True).step == 256

        filler.unlink()
        main(["train", "--resume", str(run)])
        assert load_checkpoint(run, kind="agent").step == 512
        assert read_metrics(run)["step"] == [128, 256, 384, 512]  # each update logged once
