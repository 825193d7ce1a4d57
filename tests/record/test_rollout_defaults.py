"""proclab.rollout and proclab.load, right by default: fp32 activations, the thread count chosen for acting,
levels held out *for the agent*, each level of a range played once, ground truth opt-in, and one-line
errors for frames and edits of the wrong shape."""

import warnings

import numpy as np
import pytest
import torch

import proclab
from proclab.envs import LevelSplit
from proclab.envs.levels import LEVEL_SEED_SPACE, agent_split
from proclab.errors import ProclabError, ProclabWarning
from proclab.models.interventions import Intervention
from proclab.models.loading import load
from proclab.record.rollout import rollout
from proclab.run.runtime import acting_threads, make_runtime
from support import make_agent_checkpoint


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    return load(
        make_agent_checkpoint(tmp_path_factory.mktemp("run") / "run", game="bigfish"), device="cpu"
    )  # trained on train; bigfish: an untrained agent's episodes are short there


def test_load_computes_in_fp32_unless_asked(agent, tmp_path):
    assert agent.runtime.bf16 is False
    bf16 = load(agent.source, device="cpu", precision="bf16")
    assert bf16.runtime.bf16 is True


def test_episodes_over_a_range_play_each_level_once(agent):
    ro = rollout(agent, levels="3000:8", episodes=8, num_envs=4, seed=0)
    assert sorted(ro.levels.tolist()) == list(range(3000, 3008))
    more = rollout(agent, levels="3000:3", episodes=7, num_envs=3, seed=0)  # more episodes than levels
    assert sorted(np.bincount(more.levels - 3000).tolist()) == [2, 2, 3]
    fewer = rollout(agent, levels="3000:50", episodes=6, num_envs=6, seed=1)
    assert len(set(fewer.levels.tolist())) == 6 and all(3000 <= lv < 3050 for lv in fewer.levels)


def test_held_out_levels_are_held_out_for_the_agent(agent):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ro = rollout(agent, levels="held-out", episodes=2, num_envs=2, seed=0)  # train [0, 200): test1
        assert all(1000 <= lv < 1200 for lv in ro.levels)
        rollout(agent, levels="train", episodes=1, seed=0)  # its own training levels, asked for by name
    with pytest.warns(ProclabWarning, match=r"overlap the agent's training levels train \[0, 200\)"):
        rollout(agent, levels="100:300", episodes=1, seed=0)
    with pytest.raises(ProclabError, match="pass game="):
        rollout(agent.core, levels="held-out", episodes=1)  # knows no game, nor its training levels


def test_an_overlap_warns_also_when_no_level_is_held_out():
    trained = LevelSplit(1000, LEVEL_SEED_SPACE - 1000)  # every level from 1000 on: none left after them
    with pytest.warns(ProclabWarning, match=r"on \[1100, 1110\): it has seen them$"):
        assert agent_split("1100:10", trained) == LevelSplit(1100, 10)


def test_ground_truth_is_opt_in(agent):
    ro = rollout(agent, levels="held-out", episodes=1, seed=0)
    assert ro.truth == {} and ro.goals == {}
    assert rollout(agent, levels="held-out", episodes=1, seed=0, truth=True).truth


def test_acting_threads_default_to_one_on_a_cpu_and_are_restored(agent):
    cpu = make_runtime("cpu", "fp32")
    assert acting_threads(cpu) == 1 and acting_threads(cpu, 3) == 3
    with pytest.raises(ProclabError, match="threads"):
        acting_threads(cpu, 0)
    before = torch.get_num_threads()
    seen = []
    hook = agent.torso.hook_fc.register_forward_hook(lambda *_: seen.append(torch.get_num_threads()))
    try:
        rollout(agent, levels="held-out", episodes=1, seed=0)
        rollout(agent, levels="held-out", episodes=1, seed=0, threads=2)
    finally:
        hook.remove()
    assert set(seen) == {1, 2} and torch.get_num_threads() == before


def test_frames_and_edits_of_the_wrong_shape_are_one_line_errors(agent):
    frames = torch.zeros(4, 64, 64, 3, dtype=torch.uint8)  # images as procgen renders them
    with pytest.raises(ProclabError, match=r"channels-last images; pass obs.movedim\(-1, 1\)"):
        agent.run_with_cache(frames)
    with pytest.raises(ProclabError, match="expected"):
        proclab.run_with_cache(agent, torch.zeros(4, 3, 32, 32, dtype=torch.uint8))
    bad = Intervention("torso.block1.hook_out", "all", "set", torch.ones(5))
    with pytest.raises(ProclabError, match=r"value of the edit at torso.block1.hook_out has shape \(5,\)"):
        agent.with_interventions([bad])
    with pytest.raises(ProclabError, match=r"direction at core\.0\.hook_h has 3 entries"):
        agent.with_interventions(
            [Intervention("core.0.hook_h", proclab.Direction(torch.ones(3)), "add", 1.0)]
        )
