"""`proclab record` and `proclab data info`: a real recording, kill -9 and resume, workers, and every user error."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from proclab.cli import main
from proclab.io.video import read_video
from proclab.store import EpisodeStore
from support import fill_disk, tmpfs

THREADS = ["--torch-threads", "1"]


@pytest.fixture(scope="module")
def recorded(checkpoint, tmp_path_factory):
    store = tmp_path_factory.mktemp("rec") / "DATA"
    main(
        [
            "record",
            "--agent",
            str(checkpoint),
            "--episodes",
            "6",
            "--num-envs",
            "3",
            "--out",
            str(store),
            "--videos",
            "1",
            "--action-noise",
            "seed",
            *THREADS,
        ]
    )
    return store


def check_episodes(store: EpisodeStore) -> None:
    """Every committed episode reads back whole and consistent."""
    for ep in store:
        s = ep.steps
        assert (
            len(s["obs"]) == ep.length == len(s["state_in/core.0"])
            and (s["step"] == np.arange(ep.length)).all()
        )
        assert s["terminated"][-1] or s["truncated"][-1]
        assert ep.info["return"] == pytest.approx(float(s["reward"].sum()), abs=1e-4)


def test_record_writes_a_complete_store(recorded, helpers):
    store = EpisodeStore(recorded, verify=True)
    assert store.num_episodes == 6 and store.games == ["bossfight"]
    check_episodes(store)
    (rec,) = store.recordings().values()
    assert rec["recording"]["action_noise"] == "scale=0.7,clamp=-1.8:0.8,set=9-14:-3,set=7:0.1"
    assert rec["recording"]["split"] == "train" and rec["committed"] == 6
    ep = store.episode(0)
    np.testing.assert_allclose(ep["reward_norm"], ep["reward"] / np.sqrt(helpers.REWARD_VAR), rtol=1e-5)
    assert (ep["logits"][:, 9:] == -3).all() and not (ep["logits_clean"][:, 9:] == -3).all()
    assert store.state_layout == {"core.0": [("core.0.h", (8,))]}
    (video,) = (recorded / "videos").glob("*.mp4")
    assert len(read_video(video)) == store.episode(int(video.stem.split("-")[-1])).length


def test_data_info_json(recorded, capsys):
    main(["data", "info", "--data", str(recorded), "--json", "--verify"])
    info = json.loads(capsys.readouterr().out)
    assert (
        info["episodes"] == 6 and info["schema_version"] == 1 and info["games"]["bossfight"]["episodes"] == 6
    )
    assert info["steps"] == info["games"]["bossfight"]["steps"] == EpisodeStore(recorded).num_steps
    assert info["fields"]["steps"]["obs"] == {"dtype": "uint8", "shape": [3, 64, 64]}
    assert 0 < info["bytes_per_step"] < 12288 and info["recordings"][0]["requested"] == 6


@pytest.mark.heavy
def test_kill_9_then_resume(checkpoint, tmp_path, helpers):
    """SIGKILL a real recording mid-way: committed episodes stay readable; --resume completes the count."""
    store = tmp_path / "DATA"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "proclab",
            "record",
            "--agent",
            str(checkpoint),
            "--episodes",
            "60",
            "--num-envs",
            "2",
            "--out",
            str(store),
            "--commit-seconds",
            "0",
            *THREADS,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    commit = store / "shard-00000" / "commit.json"
    deadline = time.monotonic() + 300
    while not (commit.is_file() and json.loads(commit.read_text())["episodes"] >= 2):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the recording never committed two episodes"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = EpisodeStore(store, verify=True)
    assert 2 <= killed.num_episodes < 60  # it really died mid-recording
    check_episodes(killed)

    resumed = helpers.proclab("record", "--resume", str(store), *THREADS)
    assert resumed.returncode == 0, resumed.stderr
    store_now = EpisodeStore(store, verify=True)
    assert store_now.num_episodes == 60 and [s.name for s in store_now.shards] == [
        "shard-00000",
        "shard-00001",
    ]
    for i in range(killed.num_episodes):  # what was committed before the kill is untouched
        np.testing.assert_array_equal(store_now.episode(i)["action"], killed.episode(i)["action"])
    check_episodes(store_now)
    again = helpers.proclab("record", "--resume", str(store))
    assert again.returncode == 0 and "nothing to resume" in again.stdout


@pytest.mark.slow  # about a minute: 200 episodes committed one by one (the fast test: test_store.py)
def test_record_on_a_full_disk_keeps_its_committed_episodes_and_resumes(
    checkpoint, recorded, tmp_path, helpers
):
    """A real tmpfs fills up mid-recording: one line naming the store file, exit 2, no temporary file,
    every committed episode reads back; once space is freed, --resume completes the count."""
    six = sum(f.stat().st_blocks * 512 for f in recorded.rglob("*") if f.is_file())  # pages, as tmpfs counts
    with tmpfs(tmp_path / "disk", "16m") as disk:
        store = disk / "DATA"
        filler = fill_disk(disk, leave=six)
        args = [
            "record",
            "--agent",
            str(checkpoint),
            "--episodes",
            "200",
            "--num-envs",
            "2",
            "--out",
            str(store),
        ]
        proc = helpers.proclab(*args, "--commit-seconds", "0", *THREADS)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert "cannot write episode store" in proc.stderr and "No space left on device" in proc.stderr
        assert not [p for p in store.rglob(".*") if ".tmp-" in p.name]
        full = EpisodeStore(store, verify=True)
        assert 1 <= full.num_episodes < 200
        check_episodes(full)

        filler.unlink()
        resumed = helpers.proclab("record", "--resume", str(store), *THREADS)
        assert resumed.returncode == 0, resumed.stderr
        assert EpisodeStore(store, verify=True).num_episodes == 200


@pytest.mark.distributed
@pytest.mark.parametrize(
    "extra, videos",
    [([], 0), (["--ray-address", "local", "--videos", "1"], 1)],
    ids=["processes", "ray"],
)
def test_workers_write_one_shard_each(checkpoint, tmp_path, extra, videos):
    """Two workers (local processes, or Ray tasks) record 5 episodes: one shard each, one recording."""
    if extra:
        pytest.importorskip("ray")
    store = tmp_path / "DATA"
    args = ["record", "--agent", str(checkpoint), "--episodes", "5", "--num-envs", "2", "--workers", "2"]
    main([*args, "--out", str(store), *extra, *THREADS])
    data = EpisodeStore(store, verify=True)
    assert data.num_episodes == 5 and sorted(s.episodes for s in data.shards) == [2, 3]
    assert len(data.recordings()) == 1 and len(list((store / "videos").glob("*.mp4"))) == videos
    check_episodes(data)


def one_line_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err
    return err


def test_user_errors_are_one_line(recorded, tmp_path, helpers, capsys):
    coinrun = helpers.make_checkpoint(tmp_path / "coinrun", game="coinrun")
    err = one_line_error(capsys, ["record", "--agent", str(coinrun), "--out", str(recorded)])
    assert "holds episodes of bossfight; the agent plays coinrun" in err
    err = one_line_error(capsys, ["record", "--resume", str(recorded), "--agent", str(coinrun)])
    assert "plays coinrun with 15 actions; the recording" in err and "is of bossfight" in err
    four = helpers.make_checkpoint(tmp_path / "four", num_actions=4)
    assert "has an agent with 4 actions; Procgen has 15" in one_line_error(
        capsys, ["record", "--agent", str(four), "--out", str(tmp_path / "new")]
    )
    assert "drop --split" in one_line_error(capsys, ["record", "--resume", str(recorded), "--split", "test1"])
    assert "--out DATA" in one_line_error(capsys, ["record", "--agent", str(coinrun)])
    assert "action noise 'jitter'" in one_line_error(
        capsys, ["record", "--agent", str(coinrun), "--out", str(tmp_path / "x"), "--action-noise", "jitter"]
    )
    assert "does not exist" in one_line_error(capsys, ["data", "info", "--data", str(tmp_path / "nothing")])
    existing = tmp_path / "notes.txt"
    existing.write_text("keep me")
    assert "is a file, not an episode store" in one_line_error(
        capsys, ["record", "--agent", str(coinrun), "--out", str(existing)]
    )
    assert existing.read_text() == "keep me"


def test_bad_stores_are_one_line_errors(tmp_path, helpers, capsys):
    bad = helpers.write_store(tmp_path / "v", [[3]])
    root = json.loads((bad / "zarr.json").read_text())
    root["attributes"]["proclab"]["schema_version"] = 2
    (bad / "zarr.json").write_text(json.dumps(root))
    assert "schema version 2; this proclab reads version 1" in one_line_error(
        capsys, ["data", "info", "--data", str(bad)]
    )
    half = helpers.write_store(tmp_path / "h", [[3, 4]])
    (half / "shard-00000" / "steps" / "value" / "c" / "0").unlink()
    assert "half-written" in one_line_error(capsys, ["data", "info", "--data", str(half), "--verify"])


def test_the_library_call_records_what_the_command_records(recorded, tmp_path):
    """``proclab.record_episodes`` is the command without its parser: the same settings give the same episodes
    (actions, frames, logits), and an episode count and an existing store behave as ``--out`` does."""
    import proclab
    from proclab.run.runtime import RuntimeConfig

    (rec,) = EpisodeStore(recorded).recordings().values()
    checkpoint = rec["recording"]["checkpoint"]
    settings = proclab.RecordSettings(episodes=6, num_envs=3, videos=1, action_noise="seed")
    runtime = RuntimeConfig(torch_threads=1)  # the command's --precision auto, as in `recorded`
    store = proclab.record_episodes(checkpoint, tmp_path / "DATA", settings, runtime=runtime, progress=False)
    ours, theirs = store, EpisodeStore(recorded)
    assert ours.num_episodes == theirs.num_episodes == 6
    for i in range(6):
        a, b = ours.episode(i), theirs.episode(i)
        for field in ("action", "obs", "logits", "value"):
            np.testing.assert_array_equal(a[field], b[field], err_msg=f"episode {i} {field}")
    assert len(list((tmp_path / "DATA" / "videos").glob("*.mp4"))) == 1
    fewer = dataclasses.replace(settings, episodes=2, videos=0)
    again = proclab.record_episodes(checkpoint, tmp_path / "DATA", fewer, runtime=runtime, progress=False)
    assert again.num_episodes == 8  # a compatible store gets a new shard; nothing is overwritten
