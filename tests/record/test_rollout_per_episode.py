"""Per-episode edits in proclab.rollout address episodes, not the rows of the live batch.

The batch a rollout gives the network shrinks as slots finish their quotas, and a slot plays several
episodes one after another, so row ``r`` of a forward pass is not episode ``r``. The edits here add to the
value head, which no action reads: every episode plays exactly as without the edit, and the edited values
minus the plain ones show, step by step, which episode each edit reached. The episodes have different
lengths (levels whose clock runs out after 3 to 11 steps) and there are more episodes than slots.
"""

import numpy as np
import pytest
import torch

from level_fixtures import ending_soon
from proclab.errors import ProclabError
from proclab.levels.level import Level
from proclab.models.interventions import Intervention
from proclab.models.loading import load
from proclab.record.rollout import rollout
from support import make_agent_checkpoint

LENGTHS = (3, 11, 5, 8, 4, 9, 6)  # episodes of different lengths, more than the slots


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    return load(make_agent_checkpoint(tmp_path_factory.mktemp("run") / "run"), device="cpu")


@pytest.fixture(scope="module")
def levels():
    return [ending_soon(Level.generate("coinrun", 40 + i), n) for i, n in enumerate(LENGTHS)]


def play(agent, levels, edits=(), num_envs=3):
    return rollout(agent, levels=levels, episodes=len(levels), num_envs=num_envs, seed=4, greedy=True,
                   interventions=edits)  # fmt: skip


def value_change(agent, levels, edits, num_envs=3) -> np.ndarray:
    """``(T, B)`` edited minus plain values; NaN where no step was played."""
    plain, edited = play(agent, levels, (), num_envs), play(agent, levels, edits, num_envs)
    np.testing.assert_array_equal(plain.actions, edited.actions)  # the edit changes no action
    np.testing.assert_array_equal(plain.mask, edited.mask)
    assert list(plain.lengths) == list(LENGTHS)
    return np.where(plain.mask, edited.values - plain.values, np.nan)


def test_a_per_episode_value_reaches_its_episode_at_every_step(agent, levels):
    per_episode = torch.arange(len(LENGTHS), dtype=torch.float32) * 10 + 10  # episode e: +10 (e + 1)
    change = value_change(
        agent, levels, [Intervention("heads.hook_value", "all", "add", per_episode, per_row=True)]
    )
    for e, n in enumerate(LENGTHS):
        np.testing.assert_allclose(change[:n, e], 10.0 * (e + 1), atol=1e-4, err_msg=f"episode {e}")


@pytest.mark.parametrize("episode", [1, 4, 6])
def test_rows_edit_only_their_episode(agent, levels, episode):
    change = value_change(
        agent, levels, [Intervention("heads.hook_value", "all", "add", 100.0, rows=[episode])]
    )
    played = ~np.isnan(change)
    edited = np.abs(np.nan_to_num(change)) > 50
    assert edited[:, episode].sum() == LENGTHS[episode]  # every step of its episode
    assert not edited[:, np.arange(len(LENGTHS)) != episode].any()  # and no step of another
    assert played.sum() == sum(LENGTHS)


def test_a_rows_mask_over_episodes(agent, levels):
    mask = torch.zeros(len(LENGTHS), dtype=torch.bool)
    mask[[0, 5]] = True
    change = value_change(
        agent, levels, [Intervention("heads.hook_value", "all", "add", 100.0, rows=mask)], 2
    )
    edited = np.abs(np.nan_to_num(change)) > 50
    assert list(edited.sum(0)) == [n if e in (0, 5) else 0 for e, n in enumerate(LENGTHS)]


def test_per_episode_values_of_the_wrong_size_are_one_line_errors(agent, levels):
    too_many = Intervention("heads.hook_value", "all", "add", torch.ones(len(LENGTHS) + 3), per_row=True)
    with pytest.raises(ProclabError, match=f"has {len(LENGTHS) + 3} rows; the rollout plays {len(LENGTHS)}"):
        play(agent, levels, [too_many])
    with pytest.raises(ProclabError, match="episodes 0-6"):
        play(agent, levels, [Intervention("heads.hook_value", "all", "add", 1.0, rows=[7])])
    with pytest.raises(ProclabError, match="per episode"):
        rollout(agent, levels=levels, steps=20, interventions=[too_many])
