"""Both goals in the sweep: every (direction, arm) of a real CoinRun sweep gets each goal's paired test, the
goals survive a sweep saved in parts, and a game without two goals is refused in one line."""

import numpy as np
import pytest
import torch

import proclab
from proclab.envs import EnvConfig
from proclab.errors import ProclabError
from proclab.interpret.interventions.batched_play import Outcomes
from proclab.interpret.sweep.parts import Parts, Played
from support import TINY_GRU


def runner():
    """A tiny GRU agent whose policy ignores its state: it runs or jumps right at random (sampled play), so
    no edit of its state changes what it does, and it passes a moved coin on some levels."""
    torch.manual_seed(0)
    agent = proclab.build_agent(TINY_GRU).eval()
    with torch.no_grad():
        agent.heads.policy.weight.zero_()
        agent.heads.policy.bias.fill_(-30.0)
        agent.heads.policy.bias[[7, 8]] = 0.0
    agent.env_config = EnvConfig(game=("coinrun",), mode="easy", split="train")
    return agent


def test_the_sweep_tests_both_goals_of_every_direction_and_arm():
    agent = runner()
    ro = proclab.rollout(agent, levels="0:20", episodes=2, num_envs=2, seed=1)
    basis = proclab.analyze.fit_basis(ro, "core.0.hook_h", settings=proclab.analyze.BasisSettings(n_ics=2))
    settings = proclab.analyze.SweepSettings(
        levels=3, split="100:50", arms="p05,p95", permutations=50, rows=16, bootstrap=20, greedy=False,
        landing=0, goals=True, level_rule="coin-moved:place=floor",
    )  # fmt: skip
    res = proclab.analyze.sweep(agent, "core.0.hook_h", basis=basis, rollout=ro, settings=settings)
    goals = res.summary["goals"]
    assert goals["names"] == ["coin", "end"] and goals["levels"] == 3
    assert [(r["direction"], r["arm"]) for r in goals["variants"]] == [
        (0, "p05"),
        (0, "p95"),
        (1, "p05"),
        (1, "p95"),
    ]
    complete = np.asarray(res.outcomes["level_complete"]) > 0
    assert goals["baseline"]["coin"] == pytest.approx(complete[0].mean())  # the coin is the level completed
    for r in goals["variants"]:  # a policy that ignores the state: every arm plays the baseline's episodes
        for g in ("coin", "end"):
            assert (r[g]["lost"], r[g]["gained"], r[g]["p_adjusted"]) == (0, 0, 1.0)
    assert "holm over the swept directions' 8 tests" in goals["correction"]


def test_goals_survive_a_sweep_saved_in_parts(tmp_path):
    parts = Parts(2, tmp_path, {"x": "1"})
    goals = [np.random.default_rng(i).random((2, 3, n)) > 0.5 for i, n in enumerate((2, 3))]
    for i, g in enumerate(goals):
        n = g.shape[2]
        out = Outcomes.empty(3, n, 4)
        parts.save(i, Played(out, None, None, 1.0, g))
    np.testing.assert_array_equal(parts.everything(0, 0).goals, np.concatenate(goals, axis=2))


def test_goals_of_a_game_without_them_are_refused():
    agent = runner()
    agent.env_config = EnvConfig(game=("bigfish",), mode="easy", split="train")
    ro = proclab.rollout(agent, levels="0:20", episodes=2, num_envs=2, seed=1)
    basis = proclab.analyze.fit_basis(ro, "core.0.hook_h", settings=proclab.analyze.BasisSettings(n_ics=2))
    settings = proclab.analyze.SweepSettings(levels=2, arms="p05", goals=True, rows=4)
    with pytest.raises(ProclabError, match="no pair of goals"):
        proclab.analyze.sweep(agent, "core.0.hook_h", basis=basis, rollout=ro, settings=settings)
