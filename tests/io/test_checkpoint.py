"""Checkpoints: round trip, atomic replacement, no arbitrary unpickling, clear errors."""

import json
import pickle

import numpy as np
import pytest
import torch

from proclab.errors import ProclabError
from proclab.io.checkpoint import find_checkpoint, load_checkpoint, load_weights_into, save_checkpoint
from proclab.models import AgentConfig, build_agent


def test_round_trip_with_numpy_and_bytes(tmp_path):
    agent = build_agent(AgentConfig(widths=(4, 8, 8), fc=32))
    state = {"rng": torch.get_rng_state(), "arr": np.arange(5, dtype=np.int16), "blob": [b"\x00\x01"], "n": 3}
    path = save_checkpoint(tmp_path / "ck", agent.state_dict(), {"kind": "agent", "step": 7}, state)
    ck = load_checkpoint(path, kind="agent", train_state=True)
    assert ck.step == 7
    for k, v in agent.state_dict().items():
        assert torch.equal(ck.weights[k], v)
    np.testing.assert_array_equal(ck.train_state["arr"], np.arange(5, dtype=np.int16))
    assert ck.train_state["blob"] == [b"\x00\x01"] and ck.train_state["n"] == 3
    assert not list(tmp_path.glob(".*"))  # no temporary leftovers


def test_overwrite_is_atomic_and_run_dir_resolves_latest(tmp_path):
    w = {"x": torch.zeros(2)}
    for step in (10, 30, 20):
        save_checkpoint(tmp_path / "checkpoints" / f"step_{step:012d}", w, {"kind": "agent", "step": step})
    save_checkpoint(
        tmp_path / "checkpoints" / f"step_{30:012d}", {"x": torch.ones(2)}, {"kind": "agent", "step": 30}
    )
    found = find_checkpoint(tmp_path)
    assert found.name == "step_000000000030"
    assert torch.equal(load_checkpoint(tmp_path).weights["x"], torch.ones(2))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_pickled_objects_are_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = save_checkpoint(tmp_path / "ck", {"x": torch.zeros(1)}, {"kind": "agent"}, {"ok": 1})
    with open(path / "train_state.pt", "wb") as f:
        pickle.dump({"evil": Evil()}, f)
    with pytest.raises(ProclabError, match=r"training state .* is corrupt"):
        load_checkpoint(path, train_state=True)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "no_meta", "wrong_format"])
def test_damaged_checkpoints(tmp_path, damage):
    path = save_checkpoint(tmp_path / "ck", {"x": torch.zeros(100)}, {"kind": "agent"})
    weights = path / "model.safetensors"
    if damage == "truncate":
        weights.write_bytes(weights.read_bytes()[:50])
    elif damage == "garbage":
        weights.write_bytes(b"not a checkpoint")
    elif damage == "no_meta":
        (path / "meta.json").unlink()
    else:
        (path / "meta.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ProclabError) as err:
        load_checkpoint(path)
    assert "\n" not in str(err.value)


def test_architecture_mismatch_names_the_keys(tmp_path):
    gru = build_agent(AgentConfig(core="gru", widths=(4, 8, 8), fc=32, rnn_size=16))
    ff = build_agent(AgentConfig(core="none", widths=(4, 8, 8), fc=32))
    path = save_checkpoint(tmp_path / "ck", gru.state_dict(), {"kind": "agent"})
    with pytest.raises(
        ProclabError, match=r"does not match this architecture; .*(missing|unexpected): .*core"
    ):
        load_weights_into(ff, load_checkpoint(path).weights, path)
    wide = build_agent(AgentConfig(core="none", widths=(4, 8, 8), fc=64))
    with pytest.raises(ProclabError, match=r"wrong shape: .*torso.fc.weight \(32, 512\) vs \(64, 512\)"):
        load_weights_into(
            wide,
            load_checkpoint(save_checkpoint(tmp_path / "ff", ff.state_dict(), {"kind": "agent"})).weights,
            "ff",
        )


def test_kind_and_missing(tmp_path):
    path = save_checkpoint(tmp_path / "ck", {"x": torch.zeros(1)}, {"kind": "worldmodel"})
    with pytest.raises(ProclabError, match="holds a 'worldmodel', not a 'agent'"):
        load_checkpoint(path, kind="agent")
    with pytest.raises(ProclabError, match="does not exist"):
        load_checkpoint(tmp_path / "nope")
    with pytest.raises(ProclabError, match="no training state"):
        load_checkpoint(path, train_state=True)


def test_loaded_path_is_absolute_so_records_work_from_any_directory(tmp_path, monkeypatch):
    save_checkpoint(tmp_path / "runs" / "ck", {"x": torch.zeros(1)}, {"kind": "agent", "step": 1})
    monkeypatch.chdir(tmp_path)
    ck = load_checkpoint("runs/ck")
    assert ck.path.is_absolute() and ck.path == tmp_path / "runs" / "ck"
