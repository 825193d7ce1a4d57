"""proclab.rollout: the numbers proclab record stores for the same agent, levels and seed; a cache equal to
the agent replayed on the same frames; edits; level objects; a step budget."""

import numpy as np
import pytest
import torch

from level_fixtures import ending_soon
from proclab.errors import ProclabError
from proclab.levels.level import Level
from proclab.models.interventions import Intervention
from proclab.models.loading import load
from proclab.record.ground_truth import ground_truth_names
from proclab.record.rollout import rollout
from proclab.store import EpisodeStore
from proclab.store.schema import STATE_OUT
from support import make_agent_checkpoint, record, round_trip


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    checkpoint = make_agent_checkpoint(tmp_path_factory.mktemp("run") / "run")
    return load(checkpoint, device="cpu", precision="fp32"), checkpoint


def test_a_rollout_holds_what_record_stores(agent, tmp_path):
    agent, checkpoint = agent
    store = EpisodeStore(record(checkpoint, tmp_path / "data", episodes=3, seed=5))  # 2 env slots
    ro = rollout(agent, episodes=3, num_envs=2, seed=5, truth=True)
    levels = ro.levels.numpy()
    assert sorted(levels) == sorted(store.episodes["level_seed"]) and len(set(levels)) == 3
    # a store keeps episodes as they ended, a rollout as they started: match them by level
    order = [int(np.flatnonzero(levels == lv)[0]) for lv in store.episodes["level_seed"]]
    assert ro.num_episodes == store.num_episodes == 3
    assert ro.lengths[order].tolist() == list(store.episodes["length"])
    features = torch.stack([ro.truth[k] for k in ground_truth_names(["coinrun"])["features"]], -1)
    for j, b in enumerate(order):
        n = int(ro.lengths[b])
        for field, got in (
            ("obs", ro.obs),
            ("action", ro.actions),
            ("logits_clean", ro.logits),
            ("value", ro.values),
            ("reward", ro.rewards),
            ("terminated", ro.terminated),
            ("features", features),
        ):
            assert isinstance(got, torch.Tensor)
            np.testing.assert_array_equal(got[:n, b].numpy(), store.read_steps(field, [j]), err_msg=field)
        stored_h = store.read_steps(STATE_OUT + "core.0", [j])
        np.testing.assert_array_equal(ro.cache["core.0.hook_h"][:n, b].numpy(), stored_h)
        np.testing.assert_array_equal(ro.cache.episode("core.0.hook_h", b).numpy(), stored_h)
        assert not ro.mask[n:, b].any() and not ro.obs[n:, b].any()
    np.testing.assert_allclose(ro.returns[order].numpy(), store.episodes["return"])


def test_the_cache_is_the_agent_replayed_on_the_frames(agent):
    agent, _ = agent
    ro = rollout(
        agent, levels="test1", episodes=2, num_envs=2, seed=1, cache=["torso.block1.*", "core.0.hook_h"]
    )
    assert list(ro.cache) == ["torso.block1.hook_conv", "torso.block1.hook_pool", "torso.block1.res0.hook_hidden",
                              "torso.block1.res0.hook_out", "torso.block1.res1.hook_hidden",
                              "torso.block1.res1.hook_out", "torso.block1.hook_out", "core.0.hook_h"]  # fmt: skip
    for b in range(2):
        n = int(ro.lengths[b])
        obs = ro.obs[:n, b : b + 1]
        firsts = torch.zeros(n, 1, dtype=torch.bool)
        firsts[0] = True
        with torch.no_grad():
            _, _, cache = agent.run_with_cache(obs, agent.initial_state(1), list(ro.cache), firsts)
        for name in ro.cache:
            torch.testing.assert_close(ro.cache[name][:n, b], cache[name][:, 0], rtol=1e-5, atol=1e-5)
    x, row, step = ro.cache.packed("core.0.hook_h")
    assert len(x) == ro.mask.sum() and torch.bincount(row).tolist() == ro.lengths.tolist() and step[0] == 0
    torch.testing.assert_close(x, ro.cache["core.0.hook_h"][step, row])


def test_a_replay_is_the_cache_taken_while_playing_in_any_batch(agent):
    """Episodes of different lengths replayed one and two at a time: every step as the played cache has it,
    zeros past each episode's end included (a batch runs to its own longest episode only)."""
    agent, _ = agent
    levels = [ending_soon(Level.generate("coinrun", s), n) for s, n in ((0, 4), (1, 9), (2, 6))]
    names = ["torso.block1.hook_out", "core.0.hook_h"]
    ro = rollout(agent, levels=levels, episodes=3, num_envs=3, seed=1, cache=names)
    assert len(set(ro.lengths.tolist())) == 3
    for batch in (1, 2):
        again = ro.replay(names=names, batch=batch)
        for name in names:
            torch.testing.assert_close(again[name], ro.cache[name], rtol=1e-5, atol=1e-5)


def test_edits_reach_play_and_the_cache(agent):
    agent, _ = agent
    edit = Intervention("torso.hook_fc", "all", "set", 0.0)
    ro = rollout(agent, levels="test1", episodes=2, num_envs=2, seed=2, greedy=True, interventions=[edit],
                 cache=["torso.hook_fc"])  # fmt: skip
    assert not ro.cache["torso.hook_fc"].any()
    # with every frame's features zeroed the greedy policy sees the same input at every step of an episode
    # after the first (the GRU's state still moves), so at least the logits differ from the plain agent's
    plain = rollout(agent, levels="test1", episodes=2, num_envs=2, seed=2, greedy=True)
    assert not np.array_equal(ro.logits[0], plain.logits[0])


def test_levels_as_objects_play_each_in_order(agent):
    agent, _ = agent
    base = Level.generate("coinrun", 11, mode="easy")
    levels = [base, base.remove("coin"), Level.generate("coinrun", 12, mode="easy")]
    ro = rollout(agent, levels=levels, episodes=3, num_envs=3, seed=0, truth=True)
    assert ro.levels.tolist() == [11, 11, 12]
    assert np.isnan(ro.truth["coin_dx"][0, 1]) and not np.isnan(ro.truth["coin_dx"][0, 0])
    starts = ro.start_levels()
    assert [lv.level_seed for lv in starts] == [11, 11, 12] and len(starts[1].positions("coin")) == 0


def test_a_rollout_round_trips_through_its_folder_with_its_cache_packed(agent, tmp_path):
    agent, _ = agent
    levels = [
        ending_soon(Level.generate("coinrun", seed, mode="easy"), steps) for seed, steps in ((3, 9), (4, 5))
    ]
    ro = rollout(
        agent, levels=levels, episodes=2, num_envs=2, seed=0, truth=True, cache=["torso.block1.hook_out"]
    )
    ro.cache["torso.block1.hook_out"]  # the padded view made: still saved packed
    loaded = round_trip(ro, tmp_path / "ro", unsaved=("agent",))
    with np.load(tmp_path / "ro" / "cache.npz") as cache:
        assert {k: cache[k].shape[0] for k in cache} == dict.fromkeys(ro.cache, int(ro.mask.sum()))
    with np.load(tmp_path / "ro" / "arrays.npz") as arrays:
        assert not any(k.startswith("cache") for k in arrays)
    assert [lv.level_seed for lv in loaded.start_levels()] == [3, 4] and loaded.agent is None
    with pytest.raises(ProclabError, match="pass agent="):
        loaded.replay()


def test_a_step_budget_and_bad_input(agent):
    agent, _ = agent
    ro = rollout(agent, levels="test1", steps=50, num_envs=2, seed=3)
    assert ro.mask.sum() >= 50
    with pytest.raises(ProclabError, match="episodes= "):
        rollout(agent, episodes=2, steps=10)
    with pytest.raises(ProclabError, match="split"):
        rollout(agent, levels="no-such-split", episodes=1)
    with pytest.raises(ProclabError, match="hook point"):
        rollout(agent, episodes=1, cache=["core.9.*"])
