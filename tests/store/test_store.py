"""The store: writer/reader round trip, several shards, schema validation, half-written shards, export."""

import importlib.util
import json
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from proclab.cli import main
from proclab.errors import ProclabError
from proclab.io.files import DiskFullError
from proclab.store import EpisodeStore, ShardWriter, export_minari, export_npz, unflatten_state
from proclab.store.writer import chunk_rows
from support import disk_full


def test_round_trip_with_categories_and_derived_state(tmp_path, helpers):
    store = EpisodeStore(helpers.write_store(tmp_path / "s", [[3, 5, 8]]), verify=True)
    assert (store.num_episodes, store.num_steps) == (3, 16)
    assert store.fields == ["obs", "value", "action", "terminated", "state_out/core.0", "state_in/core.0"]
    assert list(store.episodes["game"]) == ["bigfish", "coinrun", "bigfish"] and store.games == [
        "bigfish",
        "coinrun",
    ]
    assert list(store.episodes["start"]) == [0, 3, 8] and list(store.episodes["length"]) == [3, 5, 8]
    ep = store.episode(2)
    t = np.arange(8)
    assert ep.length == 8 and ep.info["level_seed"] == 2 and ep.info["return"] == 2.0
    assert (ep["value"] == 2000 + t).all() and (ep.steps["obs"][:, 0, 0, 0] == t).all()
    assert (ep["state_in/core.0"][0] == -1).all()  # the episode's state_in0
    assert (ep["state_in/core.0"][1:, 0] == 2000 + t[:-1] + 1).all()
    rows = store.read(2, ["state_in/core.0", "value"], 3, 6)  # a range that starts mid-episode
    assert (rows["state_in/core.0"][:, 0] == [2003, 2004, 2005]).all() and (
        rows["value"] == [2003, 2004, 2005]
    ).all()
    assert (store.episode(-1)["value"] == ep["value"]).all()
    with pytest.raises(IndexError):
        store.episode(3)
    with pytest.raises(KeyError):
        store.read(0, ["nope"])


def test_readers_see_the_union_of_shards_written_concurrently(tmp_path, helpers):
    path = tmp_path / "s"
    tags = [[0, 2, 4, 6], [1, 3, 5]]

    def produce(tags):
        with ShardWriter(path, commit_seconds=0, background=True) as w:
            for tag in tags:
                w.append(*helpers.episode(tag + 2, tag))

    threads = [threading.Thread(target=produce, args=(t,)) for t in tags]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    store = EpisodeStore(path, verify=True)
    assert (
        len(store.shards) == 2 and store.num_episodes == 7 and store.num_steps == sum(t + 2 for t in range(7))
    )
    by_shard = [
        [int(store.episode(i).info["level_seed"]) for i in range(7) if store.episodes["shard"][i] == s]
        for s in (0, 1)
    ]
    assert sorted(by_shard) == sorted(tags)  # each shard in its own append order
    for i in range(7):
        ep = store.episode(i)
        tag = ep.info["level_seed"]
        assert ep.length == tag + 2 and (ep["value"] == tag * 1000 + np.arange(tag + 2)).all()


def test_a_writer_starting_while_another_publishes_the_store_joins_it(tmp_path, monkeypatch):
    """The interleaving a parallel start can hit: this writer finds no zarr.json, then, before it
    lists the directory, another writer publishes the root and claims shard-00000."""
    path = tmp_path / "s"
    path.mkdir()
    real_iterdir = Path.iterdir

    def other_writer_wins(self):
        if self == path and not (path / "zarr.json").exists():
            monkeypatch.setattr(Path, "iterdir", real_iterdir)
            ShardWriter(path).close()
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", other_writer_wins)
    with ShardWriter(path) as w:
        assert w.name == "shard-00001"
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "notes.txt").write_text("x")
    with pytest.raises(ProclabError, match="not an episode store"):
        ShardWriter(tmp_path / "t")


def test_only_committed_episodes_are_visible(tmp_path, helpers):
    path = tmp_path / "s"
    w = ShardWriter(path, commit_seconds=3600)
    w.append(*helpers.episode(4, 0))
    w.commit()
    w.append(*helpers.episode(5, 1))  # buffered, not committed
    ShardWriter(path)  # a writer that never committed anything
    store = EpisodeStore(path)
    assert store.num_episodes == 1 and store.uncommitted_shards == ["shard-00001"]
    w.close()
    assert EpisodeStore(path).num_episodes == 2


def test_uncommitted_rows_past_the_commit_are_ignored(tmp_path, helpers):
    """What a kill between writing rows and renaming the commit record leaves: longer arrays, an older record."""
    path = tmp_path / "s"
    w = ShardWriter(path, commit_seconds=0)
    for tag, n in ((0, 3), (1, 4)):
        w.append(*helpers.episode(n, tag))
    old = (path / "shard-00000" / "commit.json").read_text()
    w.append(*helpers.episode(6, 2))
    w.close()
    (path / "shard-00000" / "commit.json").write_text(old)
    store = EpisodeStore(path, verify=True)
    assert (store.num_episodes, store.num_steps) == (2, 7)
    assert store._groups[0]["steps/value"].shape == (13,)
    assert (store.episode(1)["value"] == 1000 + np.arange(4)).all()


def test_writer_rejects_inconsistent_episodes(tmp_path, helpers):
    w = ShardWriter(tmp_path / "s")
    steps, info = helpers.episode(3, 0)
    with pytest.raises(ValueError, match="first axis"):
        w.append({**steps, "value": np.zeros(2)}, info)
    with pytest.raises(ValueError, match="reserved"):
        w.append(steps, {**info, "length": 3})
    with pytest.raises(ValueError, match="dtype"):
        w.append({**steps, "note": np.array(["a", "b", "c"])}, info)
    w.append(steps, info)
    with pytest.raises(ValueError, match="differ"):
        w.append({**steps, "value": steps["value"][:, None]}, info)
    w.close()


def test_several_kinds_of_episode_in_one_store_are_refused(tmp_path, helpers):
    path = helpers.write_store(tmp_path / "s", [[3]])
    with ShardWriter(path) as w:
        w.append({"obs": np.zeros((2, 3, 64, 64), np.uint8)}, {})
    with pytest.raises(ProclabError, match="different fields"):
        EpisodeStore(path)


def test_schema_versions_are_checked(tmp_path, helpers):
    path = helpers.write_store(tmp_path / "s", [[3]])
    root = json.loads((path / "zarr.json").read_text())
    root["attributes"]["proclab"]["schema_version"] = 7
    (path / "zarr.json").write_text(json.dumps(root))
    with pytest.raises(ProclabError, match="schema version 7; this proclab reads version 1; upgrade proclab"):
        EpisodeStore(path)
    root["attributes"]["proclab"]["schema_version"] = 1
    (path / "zarr.json").write_text(json.dumps(root))
    commit = path / "shard-00000" / "commit.json"
    record = json.loads(commit.read_text())
    commit.write_text(json.dumps({**record, "schema_version": None}))
    with pytest.raises(ProclabError, match=r"shard 'shard-00000'.*schema version None"):
        EpisodeStore(path)


@pytest.mark.parametrize(
    "damage", ["commit_claims_more", "commit_truncated", "array_missing", "chunk_missing"]
)
def test_half_written_shards_are_refused(tmp_path, helpers, damage):
    path = helpers.write_store(tmp_path / "s", [[3, 4]])
    shard = path / "shard-00000"
    commit = shard / "commit.json"
    if damage == "commit_claims_more":
        commit.write_text(json.dumps({**json.loads(commit.read_text()), "steps": 99}))
    elif damage == "commit_truncated":
        commit.write_text(commit.read_text()[:40])
    elif damage == "array_missing":
        (shard / "steps" / "value" / "zarr.json").unlink()
    else:
        (shard / "steps" / "obs" / "c" / "0" / "0" / "0" / "0").unlink()
        EpisodeStore(path)  # zarr would read the chunk as zeros: only verify=True can tell
        with pytest.raises(ProclabError, match="half-written: chunk 0 of obs"):
            EpisodeStore(path, verify=True)
        return
    with pytest.raises(ProclabError, match=r"shard 'shard-00000' of .* is half-written"):
        EpisodeStore(path)


def test_not_a_store(tmp_path):
    with pytest.raises(ProclabError, match="does not exist"):
        EpisodeStore(tmp_path / "missing")
    with pytest.raises(ProclabError, match="not an episode store"):
        EpisodeStore(tmp_path)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "file").write_text("")
    with pytest.raises(ProclabError, match="exists and is not an episode store"):
        ShardWriter(tmp_path / "x")


def test_check_agent_names_the_mismatch(tmp_path, helpers):
    path = tmp_path / "s"
    with ShardWriter(path, attrs={"state_layout": {"core.0": [["core.0.h", [2]]]}}) as w:
        steps, info = helpers.episode(3, 1)
        w.append({**steps, "logits": np.zeros((3, 15), np.float32)}, info)
    store = EpisodeStore(path)
    store.check_agent(15, {"core.0.h": (2,)}, ["coinrun", "bigfish"])
    with pytest.raises(ProclabError, match="15 policy logits per step; the agent has 4"):
        store.check_agent(4, {"core.0.h": (2,)})
    with pytest.raises(ProclabError, match="holds episodes of coinrun; the agent plays starpilot"):
        store.check_agent(15, {"core.0.h": (2,)}, ["starpilot"])
    with pytest.raises(ProclabError, match="layout"):
        store.check_agent(15, {"core.0.h": (64,)})
    assert set(unflatten_state({"core.0": np.zeros((5, 2))}, store.state_layout)) == {"core.0.h"}


def test_chunks_hold_about_two_mebibytes():
    assert chunk_rows(3 * 64 * 64) == 128 and chunk_rows(4) == 4096 and chunk_rows(3 * 512 * 512) == 2


def test_export_npz(tmp_path, helpers):
    store = EpisodeStore(helpers.write_store(tmp_path / "s", [[3, 5]]))
    out = export_npz(store, tmp_path / "npz")
    index = json.loads((out / "index.json").read_text())
    assert [e["file"] for e in index["episodes"]] == ["episode_000000.npz", "episode_000001.npz"]
    assert index["episodes"][1]["game"] == "coinrun" and index["episodes"][1]["length"] == 5
    with np.load(out / "episode_000001.npz") as z:
        np.testing.assert_array_equal(z["obs"], store.episode(1)["obs"])
        np.testing.assert_array_equal(z["state_in/core.0"], store.episode(1)["state_in/core.0"])
        assert z["episode/game"] == "coinrun" and z["episode/length"] == 5


def minari_ready_store(path, helpers) -> EpisodeStore:
    with ShardWriter(path) as w:
        for n in (3, 5):
            steps, info = helpers.episode(n, n)
            w.append({**steps, "reward": np.ones(n, np.float32), "truncated": np.zeros(n, bool)}, info)
    return EpisodeStore(path)


def test_export_minari_needs_its_fields_and_h5py(tmp_path, helpers, monkeypatch):
    with pytest.raises(ProclabError, match="lacks reward, truncated"):
        export_minari(helpers.write_store(tmp_path / "s", [[3]]), tmp_path / "m.hdf5")
    monkeypatch.setitem(sys.modules, "h5py", None)
    with pytest.raises(ProclabError, match="needs h5py: pip install h5py"):
        export_minari(minari_ready_store(tmp_path / "t", helpers), tmp_path / "m.hdf5")


def test_export_minari_layout(tmp_path, helpers):
    h5py = pytest.importorskip("h5py")  # not a proclab dependency
    store = minari_ready_store(tmp_path / "t", helpers)
    path = export_minari(store, tmp_path / "m.hdf5", episodes=[1])
    with h5py.File(path) as f:
        assert f.attrs["total_episodes"] == 1 and f.attrs["total_steps"] == 5
        g = f["episode_0"]
        assert g["observations"].shape == (6, 3, 64, 64) and not g["observations"][-1].any()
        np.testing.assert_array_equal(g["actions"][:], store.episode(1)["action"])
        np.testing.assert_array_equal(g["infos/value"][:], store.episode(1)["value"])


def test_data_export_command(tmp_path, helpers, capsys):
    store = minari_ready_store(tmp_path / "t", helpers)
    argv = ["data", "export", "--data", str(store.path), "--out", str(tmp_path / "npz"), "--episodes", "1"]
    main([*argv, "--fields", "obs", "state_in/core.0"])  # a derived field is exported too
    assert "exported 1 episode(s)" in capsys.readouterr().out
    with np.load(tmp_path / "npz" / "episode_000001.npz") as z:
        assert "value" not in z and z["obs"].shape == (5, 3, 64, 64)
        np.testing.assert_array_equal(z["state_in/core.0"], store.episode(1)["state_in/core.0"])
    if importlib.util.find_spec("h5py"):
        main(
            [
                "data",
                "export",
                "--data",
                str(store.path),
                "--out",
                str(tmp_path / "m.hdf5"),
                "--format",
                "minari",
            ]
        )
        assert (tmp_path / "m.hdf5").is_file()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--episodes", "7"], "episode 7 is not in"),
        (["--fields", "nope"], "unknown field(s) nope"),
        (["--format", "minari", "--fields", "obs"], "--fields applies to --format npz only"),
    ],
)
def test_data_export_bad_input_is_one_line(tmp_path, helpers, capsys, extra, message):
    store = minari_ready_store(tmp_path / "t", helpers)
    with pytest.raises(SystemExit) as exit_:
        main(["data", "export", "--data", str(store.path), "--out", str(tmp_path / "out"), *extra])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and message in err and "\n" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("episodes", [None, [5, 0, 3, 3, -1], [2], []])
def test_bulk_reads_equal_per_episode_reads(tmp_path, helpers, episodes):
    """One field of many episodes (shards interleaved, any order, repeats) = the per-episode reads."""
    store = EpisodeStore(helpers.write_store(tmp_path / "s", [[3, 5, 1], [4, 2], [6]]))
    chosen = (
        range(store.num_episodes) if episodes is None else [range(store.num_episodes)[i] for i in episodes]
    )
    for name in store.fields:
        got = store.read_steps(name, episodes)
        parts = [store.read(i, [name])[name] for i in chosen]
        expected = np.concatenate(parts) if parts else np.zeros((0, *got.shape[1:]), got.dtype)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected, err_msg=name)
    for name in ("state_in0/core.0", "return", "game", "length"):
        got = store.read_episode_field(name, episodes)
        np.testing.assert_array_equal(got, np.array([store.info(i)[name] for i in chosen]).reshape(got.shape))
    with pytest.raises(KeyError, match=r"state_in/core\.0"):
        store.read_steps("state_in/core.9")
    with pytest.raises(KeyError, match=r"state_in0/core\.0"):
        store.read_episode_field("nope")
    with pytest.raises(IndexError):
        store.read_steps("value", [store.num_episodes])


def test_a_full_disk_during_a_commit_keeps_every_committed_episode(tmp_path, helpers):
    """The disk fills up while a commit writes its chunks: one line naming the store file, no temporary
    file, the commit record still describes the episodes committed before, and they read back whole;
    a new writer adds its shard once space is free (what `proclab record --resume` does)."""
    store = tmp_path / "DATA"
    writer = ShardWriter(store, commit_seconds=0)
    for tag in range(2):
        writer.append(*helpers.episode(40, tag))
    with disk_full(store, after=2000), pytest.raises(DiskFullError) as err:
        writer.append(*helpers.episode(300, 2))
    assert "cannot write episode store file" in str(err.value) and str(store) in str(err.value)
    assert not [p for p in store.rglob("*") if ".tmp-" in p.name]
    reader = EpisodeStore(store, verify=True)
    assert reader.num_episodes == 2 and not reader.verify()
    for tag in range(2):
        np.testing.assert_array_equal(reader.episode(tag)["value"], helpers.episode(40, tag)[0]["value"])
    with ShardWriter(store, commit_seconds=0) as again:
        again.append(*helpers.episode(30, 3))
    assert EpisodeStore(store, verify=True).num_episodes == 3


def test_new_stores_checksum_every_chunk_and_old_ones_stay_readable(tmp_path, helpers, monkeypatch):
    import proclab.store.writer as writer_module

    new = helpers.write_store(tmp_path / "new", [[5, 7]])
    codecs = json.loads((new / "shard-00000" / "steps" / "obs" / "zarr.json").read_text())["codecs"]
    assert [c["name"] for c in codecs][-1] == "crc32c"
    current = writer_module.compressors_for
    monkeypatch.setattr(writer_module, "compressors_for", lambda dtype: current(dtype)[:1])
    old = helpers.write_store(tmp_path / "old", [[5, 7]])  # as written before the checksum
    codecs = json.loads((old / "shard-00000" / "steps" / "obs" / "zarr.json").read_text())["codecs"]
    assert "crc32c" not in [c["name"] for c in codecs]
    a, b = EpisodeStore(new, verify=True), EpisodeStore(old, verify=True)
    assert not b.verify()
    for i in range(2):
        for field in ("obs", "value", "state_in/core.0"):
            np.testing.assert_array_equal(a.episode(i)[field], b.episode(i)[field])


def test_a_flipped_byte_names_the_shard_chunk_and_episodes_and_the_rest_still_reads(
    tmp_path, helpers, capsys
):
    """Episodes of 100 steps: obs chunks hold 128 rows, so chunk 2 (rows 256-383) holds episodes 2 and 3."""
    store = helpers.write_store(tmp_path / "DATA", [[100] * 6])
    chunk = store / "shard-00000" / "steps" / "obs" / "c" / "2" / "0" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    reader = EpisodeStore(store)
    for i in (0, 1, 4, 5):  # undamaged episodes read as before
        assert reader.episode(i)["obs"][:, 0, 0, 1].tolist() == [i] * 100
    with pytest.raises(ProclabError) as err:
        reader.episode(2)
    message = str(err.value)
    assert "shard 'shard-00000' steps/obs chunk 2 (rows 256-383, episodes 2, 3)" in message, message
    assert "\n" not in message
    with pytest.raises(ProclabError, match="steps/obs chunk 2"):
        reader.read_steps("obs")

    with pytest.raises(SystemExit) as exit_:
        main(["data", "info", "--data", str(store), "--verify"])
    out = capsys.readouterr()
    assert exit_.value.code == 2 and out.err.count("\n") == 1, out.err
    assert (
        "1 damaged chunk(s): shard 'shard-00000' steps/obs chunk 2 (rows 256-383, episodes 2, 3)" in out.err
    )
    assert "the other 4 of 6 episodes read fine" in out.err


def test_blobs_of_any_length_read_back_exactly_across_commits_and_shards(tmp_path, helpers):
    """Per-episode byte strings (a game's initial state) of varied sizes, committed in several batches
    and shards, read back byte for byte; a flipped byte in one names the episodes of its chunk."""
    rng = np.random.default_rng(0)
    made = []
    for shard in range(2):
        with ShardWriter(tmp_path / "s", commit_seconds=0 if shard else 1e9) as w:
            for tag in range(5):
                blob = rng.integers(0, 256, int(rng.integers(0, 3000)), dtype=np.uint8).tobytes()
                steps, info = helpers.episode(3, tag)
                w.append(steps, {**info, "initial_state": blob})
                made.append(blob)
    store = EpisodeStore(tmp_path / "s", verify=True)
    assert store.blob_fields == ["initial_state"] and not store.verify()
    assert [store.read_blob("initial_state", i) for i in range(10)] == made
    assert "initial_state" not in store.episode_fields  # a blob is no array column
    with pytest.raises(ProclabError, match="holds no per-episode 'nope'"):
        store.read_blob("nope", 0)
    chunk = tmp_path / "s" / "shard-00001" / "blobs" / "initial_state" / "c" / "0"
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    (damage,) = EpisodeStore(tmp_path / "s").verify()
    assert damage["field"] == "blobs/initial_state" and damage["episodes"] == [5, 6, 7, 8, 9]


def test_the_checkpoints_that_recorded_a_store_are_read_from_its_recordings(tmp_path, helpers):
    path = tmp_path / "s.zarr"
    for shard, (recording, checkpoint) in enumerate([("a", "/runs/x"), ("b", "/runs/y"), ("c", "/runs/x")]):
        with ShardWriter(
            path, f"shard-{shard}", attrs={"recording": {"id": recording, "checkpoint": checkpoint}}
        ) as w:
            w.append(*helpers.episode(3, shard))
    store = EpisodeStore(path)
    assert store.recording_checkpoints() == [Path("/runs/x"), Path("/runs/y")]
    assert store.recording_checkpoint() == Path("/runs/x")
    demos = EpisodeStore(helpers.write_store(tmp_path / "demos.zarr", [[3]]))
    assert demos.recording_checkpoints() == []
    with pytest.raises(ProclabError, match="was not written by proclab record"):
        demos.recording_checkpoint()
