"""Windows over episodes: where they start, never across episodes, padding past the end, DataLoader workers."""

import pytest
import torch

from proclab.errors import ProclabError
from proclab.store.windows import WindowDataset


@pytest.fixture(scope="module")
def store(tmp_path_factory, helpers):
    return helpers.write_store(tmp_path_factory.mktemp("windows") / "s", [[3, 5], [8]])  # tags 0, 1 | 2


def windows(data):
    return [(int(e), int(o)) for e, o in zip(data.episode_ids, data.offsets, strict=True)]


def test_windows_inside_episodes_by_default(store):
    assert windows(WindowDataset(store, 4)) == [(1, 0), (2, 0), (2, 4)]
    assert windows(WindowDataset(store, 4, stride=1)) == [(1, 0), (1, 1)] + [(2, o) for o in range(5)]
    assert windows(WindowDataset(store, 3, stride=2, episodes=[0, 2])) == [(0, 0), (2, 0), (2, 2), (2, 4)]
    for item in WindowDataset(store, 4, stride=1):
        assert item["mask"].all()
        tag, off = int(item["episode"]), int(item["offset"])
        assert (item["value"] == tag * 1000 + off + torch.arange(4)).all()  # one episode, consecutive rows
        assert item["first"].tolist() == [off == 0, False, False, False]


def test_windows_at_episode_starts_are_padded_past_the_end(store):
    data = WindowDataset(store, 6, episode_starts=True, min_steps=1, info=("game", "level_seed"))
    assert windows(data) == [(0, 0), (1, 0), (2, 0)]
    short = data[0]  # episode 0 has 3 steps: rows 3-5 are padding
    assert short["mask"].tolist() == [True] * 3 + [False] * 3
    assert short["value"].tolist() == [0, 1, 2, 0, 0, 0] and short["value"].dtype == torch.float32
    assert (short["obs"][3:] == 0).all() and short["obs"].shape == (6, 3, 64, 64)
    assert short["terminated"].tolist() == [False, False, True, False, False, False]
    assert short["state_in/core.0"][:, 0].tolist() == [-1, 1, 2, 0, 0, 0]  # state_in0, then state_out[t - 1]
    assert short["first"].tolist() == [True] + [False] * 5
    assert (short["game"], int(short["level_seed"])) == ("bigfish", 0)
    assert data[2]["mask"].all()


def test_min_steps_allows_windows_that_run_past_the_end(store):
    data = WindowDataset(store, 4, stride=3, min_steps=2)
    assert windows(data) == [(0, 0), (1, 0), (1, 3), (2, 0), (2, 3), (2, 6)]
    tail = data[2]  # episode 1 (5 steps) from row 3: two real rows
    assert tail["mask"].tolist() == [True, True, False, False]
    assert tail["value"].tolist() == [1003, 1004, 0, 0]
    assert tail["state_in/core.0"][:2, 0].tolist() == [1003, 1004]  # state_out of rows 2 and 3
    assert tail["state_out/core.0"][:2, 0].tolist() == [1004, 1005]


def test_a_window_longer_than_every_episode_is_refused(store):
    with pytest.raises(ProclabError, match="longest of its 3 episodes has 8"):
        WindowDataset(store, 9)
    assert len(WindowDataset(store, 9, min_steps=8)) == 1
    with pytest.raises(ProclabError, match="unknown field"):
        WindowDataset(store, 2, fields=["obs", "logits"])
    with pytest.raises(ProclabError, match="min_steps"):
        WindowDataset(store, 2, min_steps=3)


def test_dataloader_workers_read_the_same_windows(store):
    data = WindowDataset(store, 4, stride=1, min_steps=2, fields=["obs", "value", "state_in/core.0"])
    direct = torch.utils.data.default_collate([data[i] for i in range(len(data))])
    loader = torch.utils.data.DataLoader(data, batch_size=len(data), num_workers=2)
    (batch,) = list(loader)
    assert batch.keys() == direct.keys()
    for key in batch:
        assert torch.equal(batch[key], direct[key]), key
