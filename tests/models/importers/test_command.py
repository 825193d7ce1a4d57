"""``proclab import``: what it writes, what it infers, and every refusal in one line (exit 2)."""

from __future__ import annotations

import argparse
import hashlib
import json

import pytest
import torch

from foreign_agents import CleanbaRef, CleanRLRef, TorchbeastRef, TrainProcgenRef
from proclab.errors import ProclabError
from proclab.io.checkpoint import load_checkpoint
from proclab.models.importers import read_agent
from proclab.models.importers.command import ImportArgs, import_agent
from support import proclab


def _import(path, **kw):
    return import_agent(ImportArgs(source=path, **kw))


def _refused(path, match, **kw):
    with pytest.raises(ProclabError, match=match):
        _import(path, **kw)


def test_run_directory_holds_config_checkpoint_and_provenance(tmp_path):
    src = TrainProcgenRef().save(tmp_path / "model_4096.pth")
    run, record = _import(
        src, game="coinrun", mode="hard", split="train-500", backgrounds=False, out=tmp_path / "run"
    )
    config = json.loads((run / "config.json").read_text())
    ckpt = load_checkpoint(run, kind="agent")
    assert ckpt.step == 4096 and record["step_from"] == "file name model_<steps>.pth"
    assert record["sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert record["format"] == "train-procgen" and record["format_chosen_by"] == "tensor names"
    assert ckpt.meta["import"]["sha256"] == record["sha256"]
    assert config["agent"] == ckpt.meta["agent"]
    assert (config["agent"]["core"], config["agent"]["fc"], config["agent"]["rnn_size"]) == ("gru", 32, 32)
    assert tuple(config["agent"]["widths"]) == (8, 16, 16)
    assert config["env"]["mode"] == "hard" and config["env"]["split"] == "train-500"
    assert config["env"]["use_backgrounds"] is False
    assert record["ignored_tensors"] == ["init_hx"]
    assert set(record["conventions"]) >= {"observations", "actions", "state", "previous_reward"}
    assert not [p for p in run.parent.iterdir() if p.name.startswith(".")]  # no temporary left behind


@pytest.mark.parametrize("key", ["model_state_dict", "state_dict", None])
def test_train_procgen_weights_under_any_key(tmp_path, key):
    src = TrainProcgenRef(gru=False).save(tmp_path / "model_8.pth", key=key)
    _, _, imported = read_agent(src)
    assert imported.config.core == "none"


def test_architecture_is_inferred_from_shapes(tmp_path):
    _, _, a = read_agent(
        TrainProcgenRef(widths=(32, 64, 64), fc=256, gru=False).save(tmp_path / "model_1.pth")
    )
    assert (a.config.widths, a.config.fc) == ((32, 64, 64), 256)
    _, _, b = read_agent(TorchbeastRef(core="delta", hidden=24, heads=3, ff=40).save(tmp_path / "model.tar"))
    assert (b.config.hidden, b.config.num_heads, b.config.head_dim, b.config.ff) == (24, 3, 8, 40)
    assert b.config.prev_reward and not b.config.prev_reward_reset


def test_file_facts_fill_the_setting(tmp_path):
    run, record = _import(TorchbeastRef(core="srwm").save(tmp_path / "model.tar"), out=tmp_path / "tb")
    env = json.loads((run / "config.json").read_text())["env"]
    assert (env["game"], env["mode"], env["split"]) == (["bigfish"], "easy", "0:200")
    assert record["step"] == 123456 and record["setting_from"]["game"].startswith("flags")
    assert load_checkpoint(run).meta["reward_normalisation"]["clip"] == 1.0  # reward_clipping abs_one
    run, record = _import(
        CleanbaRef(env_id="BigfishHard-v0").save(tmp_path / "a.cleanrl_model"), out=tmp_path / "cb"
    )
    env = json.loads((run / "config.json").read_text())["env"]
    assert (env["game"], env["mode"]) == (["bigfish"], "hard")
    assert record["setting_from"]["split"] == "assumed"


def test_format_can_be_forced_and_is_checked(tmp_path):
    src = CleanRLRef().save(tmp_path / "agent.pt")
    assert (
        _import(src, game="bigfish", format="cleanrl", out=tmp_path / "r")[1]["format_chosen_by"]
        == "--format"
    )
    _refused(src, "is not a torchbeast checkpoint", game="bigfish", format="torchbeast")
    _refused(src, "unknown checkpoint format", game="bigfish", format="tf1")


def test_refusals(tmp_path):
    (tmp_path / "empty.pth").write_bytes(b"")
    _refused(tmp_path / "empty.pth", "is empty")
    good = TrainProcgenRef().save(tmp_path / "model_1.pth")
    (tmp_path / "trunc.pth").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    _refused(tmp_path / "trunc.pth", "truncated or corrupt")
    (tmp_path / "nothing").mkdir()
    _refused(tmp_path / "nothing", "holds no checkpoint")
    _refused(tmp_path / "missing.pth", "does not exist")
    (tmp_path / "junk.bin").write_bytes(b"\x01\x02hello")
    _refused(tmp_path / "junk.bin", "neither a PyTorch checkpoint nor a Flax msgpack")
    _refused(good, "pass --game")  # a train-procgen file does not say its game


def test_refuses_pickled_objects(tmp_path):
    ref = TrainProcgenRef()
    torch.save({"model_state_dict": ref.w.sd, "args": argparse.Namespace(lr=1)}, tmp_path / "model_2.pth")
    _refused(tmp_path / "model_2.pth", r"argparse\.Namespace.*never unpickles", game="coinrun")


def test_refuses_unknown_missing_and_misshapen_tensors(tmp_path):
    ref = TrainProcgenRef()
    ref.w.sd["embedder.block1.attention.weight"] = torch.zeros(3)
    _refused(ref.save(tmp_path / "model_1.pth"), "embedder.block1.attention.weight", game="coinrun")
    ref = TrainProcgenRef()
    del ref.w.sd["fc_value.bias"]
    _refused(ref.save(tmp_path / "model_2.pth"), "lacks tensor 'fc_value.bias'", game="coinrun")
    ref = TrainProcgenRef()
    ref.w.sd["embedder.block2.res1.conv2.weight"] = torch.zeros(16, 16, 5, 5)
    _refused(ref.save(tmp_path / "model_3.pth"), "embedder.block2.res1.conv2.weight.*needs", game="coinrun")


def test_refuses_an_agent_procgen_cannot_drive(tmp_path):
    ref = CleanRLRef()
    ref.w.linear("actor", 9, 32)
    _refused(ref.save(tmp_path / "atari.pt"), "9 policy outputs.*15 actions", game="bigfish")


def test_refuses_a_nature_cnn_built_for_84x84(tmp_path):
    ref = TrainProcgenRef(nature=True, gru=False, widths=(32, 64, 64))
    ref.w.linear("embedder.layers.7", 32, 64 * 7 * 7)
    _refused(ref.save(tmp_path / "model_1.pth"), "another image size", game="coinrun")


def test_refuses_another_game_or_mode_than_the_file_says(tmp_path):
    src = TorchbeastRef().save(tmp_path / "model.tar")  # its flags: bigfish, easy
    _refused(src, "trained in game bigfish.*--allow-mismatch", game="starpilot")
    _refused(src, "trained in mode easy.*--allow-mismatch", mode="hard")
    run, _ = _import(src, game="starpilot", mode="hard", allow_mismatch=True, out=tmp_path / "r")
    env = json.loads((run / "config.json").read_text())["env"]
    assert (env["game"], env["mode"]) == (["starpilot"], "hard")


def test_never_overwrites_without_force(tmp_path):
    src = CleanRLRef().save(tmp_path / "agent.pt")
    out = tmp_path / "run"
    _import(src, game="bigfish", out=out)
    before = (out / "config.json").read_text()
    _refused(src, "already exists; pass --force", game="bigfish", out=out)
    assert (out / "config.json").read_text() == before
    _import(src, game="coinrun", out=out, force=True)
    assert json.loads((out / "config.json").read_text())["env"]["game"] == ["coinrun"]
    (tmp_path / "notarun").mkdir()
    _refused(src, "not a run directory", game="bigfish", out=tmp_path / "notarun", force=True)


def test_directory_means_its_latest_train_procgen_checkpoint(tmp_path):
    ref = TrainProcgenRef()
    for steps in (65536, 131072, 98304):
        ref.save(tmp_path / f"model_{steps}.pth")
    source, _, imported = read_agent(tmp_path)
    assert source.path.name == "model_131072.pth" and imported.facts.step == 131072


@pytest.mark.heavy
def test_command_line_imports_and_eval_plays_it(tmp_path):
    src = CleanbaRef().save(tmp_path / "cleanba.cleanrl_model")
    out = tmp_path / "run"
    done = proclab("import", str(src), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "format: cleanba" in done.stdout and "assumed: split" in done.stdout and str(out) in done.stdout
    done = proclab(
        "eval", "--agent", str(out), "--episodes", "2", "--split", "test1", "--out", str(tmp_path / "e.json")
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "e.json").read_text())["rows"][0]["episodes"] == 2
    again = proclab("import", str(src), "--out", str(out))
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "already exists" in again.stderr
