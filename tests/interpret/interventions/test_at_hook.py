"""analyze edit: a feed-forward agent edited at a conv map or its fc layer, played paired."""

import json

import numpy as np
import pytest

from proclab.cli import main as cli
from proclab.models import AgentConfig
from proclab.store import EpisodeStore
from support import TINY_AGENT, make_agent_checkpoint, record


@pytest.fixture(scope="module")
def ff(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ff")
    ckpt = make_agent_checkpoint(tmp / "agent", AgentConfig(core="none", **TINY_AGENT), game="bossfight")
    return ckpt, record(ckpt, tmp / "data.zarr", episodes=2)


def edit_at(out, ckpt, hook, edit, *extra):
    cli(
        [
            "analyze",
            "edit",
            "--out",
            str(out),
            "--agent",
            str(ckpt),
            "--hook",
            hook,
            "--edit",
            edit,
            "--episodes",
            "3",
            "--num-envs",
            "3",
            "--split",
            "0:50",
            "--bootstrap",
            "200",
            "--torch-threads",
            "1",
            *extra,
        ]
    )
    return json.loads((out / "intervene-edit" / "summary.json").read_text())


def actions(path):
    store = EpisodeStore(path)
    order = np.argsort(store.episodes["level_seed"])
    return [store.read(int(i), ["action"])["action"] for i in order]


def test_identity_edit_at_a_conv_map_replays_the_baseline(tmp_path, ff):
    ckpt, _ = ff
    summary = edit_at(tmp_path / "a", ckpt, "torso.block1.hook_out", "channel 2 scale 1")
    real = tmp_path / "a" / "intervene-edit" / "real"
    for b, i in zip(actions(real / "baseline.zarr"), actions(real / "intervened.zarr"), strict=True):
        np.testing.assert_array_equal(b, i)
    assert summary["real"]["actions"]["tv_distance"]["value"] == 0
    assert summary["intervention"] == "torso.block1.hook_out channel 2 scale 1"


def test_mean_ablating_the_fc_layer_changes_play(tmp_path, ff):
    ckpt, data = ff
    summary = edit_at(tmp_path / "b", ckpt, "torso.hook_fc", "all mean", "--data", str(data))
    store = EpisodeStore(tmp_path / "b" / "intervene-edit" / "real" / "intervened.zarr")
    acts = np.concatenate([store.read(i, ["action"])["action"] for i in range(store.num_episodes)])
    assert len(np.unique(acts)) == 1  # greedy on a constant fc layer: one action forever
    assert summary["real"]["levels"] == 3


def test_mean_edit_without_data_is_refused(tmp_path, ff, capsys):
    ckpt, _ = ff
    with pytest.raises(SystemExit) as e:
        edit_at(tmp_path / "c", ckpt, "torso.hook_fc", "all mean")
    assert e.value.code == 2 and "--data" in capsys.readouterr().err
