"""Windows -> simulator inputs and labels: each row lands where the table in worldmodel/batch.py says."""

import numpy as np
import pytest
import torch
from torch.utils.data import default_collate

from proclab.store import EpisodeStore, ShardWriter
from proclab.store.schema import STATE_LAYOUT_ATTR
from proclab.store.state_codec import StateCodec
from proclab.worldmodel.batch import make_batch, window_dataset
from proclab.worldmodel.config import WorldModelConfig

N_INIT, SIM = 3, 4  # windows of 6 rows; r0 = 2
CODEC = StateCodec({"core.0.h": (2,)})


def tagged_episode(length: int, tag: int, terminal_rows: tuple[int, ...]):
    """Every value says which row of which episode it came from: ``100 * tag + t``."""
    t = np.arange(length)
    value = (100 * tag + t).astype(np.float32)
    obs = np.zeros((length, 3, 64, 64), np.uint8)
    obs[:, 0, 0, 0] = t
    obs[:, 0, 0, 1] = tag
    terminated = np.isin(t, terminal_rows)
    steps = {
        "obs": obs,
        "action": (t % 15).astype(np.int64),
        "reward_norm": value,
        "terminated": terminated,
        "value": value,
        "logits_clean": np.repeat(value[:, None], 15, 1),
        "state_out/core.0": np.stack([value + 0.5] * 2, 1),
    }
    return steps, {"game": "coinrun", "state_in0/core.0": np.full(2, -1, np.float32)}


@pytest.fixture(scope="module")
def windows(tmp_path_factory):
    path = tmp_path_factory.mktemp("aligned") / "store.zarr"
    layout = {"core.0": [["core.0.h", [2]]]}
    with ShardWriter(path, attrs={STATE_LAYOUT_ATTR: layout}, commit_seconds=0) as w:
        w.append(*tagged_episode(8, 0, terminal_rows=(7,)))  # a recording: terminal on the last row
        w.append(*tagged_episode(8, 1, terminal_rows=(4,)))  # a simulator's episode going on after a terminal
    config = WorldModelConfig(num_init_steps=N_INIT, num_sim_steps=SIM)
    return window_dataset(EpisodeStore(path), config, CODEC, "reward_norm"), config


def test_every_label_sits_on_its_row(windows):
    dataset, config = windows
    assert len(dataset) == 2 * (8 - N_INIT + 1)  # padded windows need only their initial frames
    items = [dataset[i] for i in range(len(dataset))]
    batch = make_batch(default_collate(items), config, CODEC, "reward_norm")
    r0 = N_INIT - 1
    for b, item in enumerate(items):
        tag, o = int(item["episode"]), int(item["offset"])
        base = 100 * tag

        def row(t, length=8, base=base):  # the value a row holds, 0 for padding
            return base + t if t < length else 0

        assert batch.init_frames[:, b, 0, 0, 0].tolist() == [o + i for i in range(N_INIT)]
        assert batch.frames[:, b, 0, 0, 0].tolist() == [(o + r0 + k) * (o + r0 + k < 8) for k in range(SIM)]
        assert batch.prev_actions[:, b].tolist() == [
            ((o + r0 + k - 1) % 15) * (o + r0 + k - 1 < 8) for k in range(SIM)
        ]
        assert batch.actions[:, b].tolist() == [((o + r0 + k) % 15) * (o + r0 + k < 8) for k in range(SIM)]
        assert batch.reward[:, b].tolist() == [row(o + r0 + k - 1) for k in range(SIM)]
        assert batch.value[:, b].tolist() == [row(o + r0 + k) for k in range(SIM)]
        assert batch.logits[:, b, 3].tolist() == [row(o + r0 + k) for k in range(SIM)]
        # state_in[t] = state_out[t - 1] = base + t - 0.5; the initial state (-1) only at an episode's row 0
        assert batch.agent_h0[b].tolist() == [base + o + r0 - 0.5] * 2
        assert batch.agent_states[:, b, 0].tolist() == [
            row(o + r0 + k) + 0.5 * (o + r0 + k < 8) for k in range(SIM)
        ]
        terminal = 7 if tag == 0 else 4
        assert batch.done[:, b].tolist() == [float(o + r0 + k - 1 == terminal) for k in range(SIM)]
        assert batch.frame_mask[:, b].tolist() == [o + r0 + k < 8 for k in range(SIM)]
        assert batch.prev_mask[:, b].tolist() == [o + r0 + k - 1 < 8 for k in range(SIM)]
        # the agent-state loss stops after the first terminal the window holds
        ended = [o <= terminal < o + r0 + k for k in range(SIM)]
        assert batch.state_mask[:, b].tolist() == [o + r0 + k < 8 and not ended[k] for k in range(SIM)]


def test_windows_refuse_a_missing_reward_field(windows):
    dataset, config = windows
    from proclab.errors import ProclabError

    with pytest.raises(ProclabError, match="no 'reward' field"):
        window_dataset(dataset.store, config, CODEC, "reward")


def test_state_codec_round_trips_a_multi_layer_state():
    shapes = {"core.0.h": (3,), "core.0.c": (3,), "core.1.F": (2, 2, 2)}
    codec = StateCodec(shapes)
    assert codec.width == 14 and codec.layer_slices() == {"core.0": slice(0, 6), "core.1": slice(6, 14)}
    state = {k: torch.randn(5, *s) for k, s in shapes.items()}
    flat = codec.flatten(state)
    back = codec.unflatten(flat)
    assert all(torch.equal(back[k], state[k]) for k in shapes)
    assert torch.equal(flat[:, :3], state["core.0.h"]) and torch.equal(
        flat[:, 6:], state["core.1.F"].flatten(1)
    )
