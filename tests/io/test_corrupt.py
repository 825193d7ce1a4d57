"""Damaged artefacts (empty, truncated, a flipped byte) read by a command: one line naming the file and
the problem, exit 2, never a traceback. (Analysis folders: tests/interpret/test_reliability.py; panel
inputs: tests/panel/test_reliability.py; the store's chunks: tests/store/test_store.py.)"""

import shutil
from pathlib import Path

import pytest

from proclab.cli import main
from support import TINY_FLAGS, TINY_PPO

TINY = [*TINY_PPO, "--val-num-envs", "2", "--device", "cpu", "--no-tensorboard", *TINY_FLAGS]
CHECKPOINT = "checkpoints/step_000000000256"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    main(["train", *TINY, "--total-steps", "256", "--run-root", str(root)])
    (run,) = root.glob("ppo/*/*/*")
    return run


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    from support import write_samples

    return write_samples(tmp_path_factory.mktemp("store") / "DATA", n=6, steps=10)


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "empty":
        data = b""
    elif how == "truncate":
        data = data[: len(data) // 2]
    elif how == "garbage":
        data = bytes(range(256)) * 4
    else:  # flip one byte well inside the file (past any header)
        data = bytearray(data)
        data[len(data) * 3 // 4] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("file", "how", "argv", "expected"),
    [
        ("config.json", "truncate", ["train", "--resume", "RUN"], "is corrupt or truncated"),
        ("config.json", "empty", ["train", "--resume", "RUN"], "is empty"),
        (f"{CHECKPOINT}/meta.json", "truncate", ["eval", "--agent", "RUN"], "unreadable meta.json"),
        (f"{CHECKPOINT}/model.safetensors", "flip", ["eval", "--agent", "RUN"], "checksum mismatch"),
        (f"{CHECKPOINT}/model.safetensors", "truncate", ["eval", "--agent", "RUN"], "are missing or corrupt"),
        (
            f"{CHECKPOINT}/train_state.pt",
            "flip",
            ["train", "--resume", "RUN", "--total-steps", "384"],
            "is corrupt",
        ),
        ("metrics.csv", "garbage", ["plot", "RUN"], "are corrupt"),
    ],
)
def test_a_damaged_run_file_is_one_line_naming_it(run, tmp_path, capsys, file, how, argv, expected):
    work = shutil.copytree(run, tmp_path / "run")
    damage(work / file, how)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main([str(work) if a == "RUN" else a for a in argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert expected in err and str(work / file).rsplit("/", 1)[0] in err, err


@pytest.mark.parametrize(
    ("file", "how", "expected"),
    [
        ("zarr.json", "truncate", "unreadable zarr.json"),
        ("shard-00000/commit.json", "truncate", "unreadable commit record"),
        ("shard-00000/zarr.json", "empty", "unreadable commit record or metadata"),
        ("shard-00000/episodes/length/c/0", "flip", "shard 'shard-00000' episodes/length chunk 0"),
        ("shard-00000/steps/value/zarr.json", "truncate", "is missing or unreadable"),
    ],
)
def test_a_damaged_store_file_is_one_line_naming_it(store, tmp_path, capsys, file, how, expected):
    work = shutil.copytree(store, tmp_path / "DATA")
    damage(work / file, how)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["data", "info", "--data", str(work)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert expected in err and str(work) in err, err
