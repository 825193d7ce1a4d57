"""Both goals in the sweep: every (direction, arm) of a real CoinRun sweep gets each goal's paired test, and the
tests move as a planted agent's edit moves its goals; the goals survive a sweep saved in parts, and a game
without two goals is refused in one line."""

import dataclasses

import numpy as np
import pytest
import torch

import proclab
from planted import unit_basis
from planted_goals import GoRunner
from proclab.envs import EnvConfig
from proclab.errors import ProclabError
from proclab.interpret.interventions.batched_play import Outcomes
from proclab.interpret.sweep.parts import Parts, Played
from support import TINY_GRU


def runner():
    """A tiny GRU agent whose policy ignores its state: it runs or jumps right at random (sampled play)."""
    torch.manual_seed(0)
    agent = proclab.build_agent(TINY_GRU).eval()
    with torch.no_grad():
        agent.heads.policy.weight.zero_()
        agent.heads.policy.bias.fill_(-30.0)
        agent.heads.policy.bias[[7, 8]] = 0.0
    agent.env_config = EnvConfig(game=("coinrun",), mode="easy", split="train")
    return agent


def test_the_sweep_s_goal_columns_move_as_planted():
    """:class:`GoRunner` stops where it starts when its ``go`` unit (direction 0) is held at the start state's
    zero: that arm loses every coin and every end the baseline reached on the same levels and gains none; its
    other arm (p95, as in play) and every edit of the unit read by nothing (direction 1) change no level."""
    agent = GoRunner()
    ro = proclab.rollout(agent, levels="held-out", episodes=2, num_envs=2, seed=1)
    settings = proclab.analyze.SweepSettings(
        levels=6, split="1999990000:10000", arms="collapse,p95", permutations=50, rows=30, bootstrap=20,
        landing=0, goals=True, level_rule="coin-moved",
    )  # fmt: skip
    res = proclab.analyze.sweep(agent, "core.0.hook_h", basis=unit_basis(2), rollout=ro, settings=settings)
    goals = res.summary["goals"]
    assert goals["names"] == ["coin", "end"] and goals["levels"] == 6
    assert [(r["direction"], r["arm"]) for r in goals["variants"]] == [
        (0, "collapse"),
        (0, "p95"),
        (1, "collapse"),
        (1, "p95"),
    ]
    complete = np.asarray(res.outcomes["level_complete"]) > 0
    assert goals["baseline"]["coin"] == pytest.approx(complete[0].mean())  # the coin is the level completed
    reached = {g: round(goals["baseline"][g] * 6) for g in ("coin", "end")}
    assert reached["coin"] >= 3  # the runner takes the moved coin on its way on most of these levels
    for r in goals["variants"]:
        for g in ("coin", "end"):
            stopped = (r["direction"], r["arm"]) == (0, "collapse")
            assert (r[g]["lost"], r[g]["gained"]) == ((reached[g], 0) if stopped else (0, 0)), (r, g)
            assert r[g]["intervened"] == (0.0 if stopped else goals["baseline"][g])
    assert "holm over the swept directions' 8 tests" in goals["correction"]


@pytest.mark.heavy  # make test-heavy: spawned processes (or a second sweep) of ten seconds and more
def test_a_sweep_in_memory_plays_its_random_directions_as_the_goal_rule_s_controls():
    """``random_directions`` of the library's sweep (the command's ``--random-directions``): each drawn direction
    is swept with every arm after the basis's own, flagged random in the goals block, tested in a family of its
    own; the basis's rows are those of the sweep without them."""
    agent = GoRunner()
    ro = proclab.rollout(agent, levels="held-out", episodes=2, num_envs=2, seed=1)
    settings = proclab.analyze.SweepSettings(
        levels=4, split="1999990000:10000", arms="collapse,p95", permutations=20, rows=24, bootstrap=20,
        landing=0, goals=True, level_rule="coin-moved",
    )  # fmt: skip
    plain = proclab.analyze.sweep(agent, "core.0.hook_h", basis=unit_basis(2), rollout=ro, settings=settings)
    drawn = proclab.analyze.sweep(
        agent,
        "core.0.hook_h",
        basis=unit_basis(2),
        rollout=ro,
        settings=dataclasses.replace(settings, random_directions=3),
    )
    rows = drawn.summary["goals"]["variants"]
    assert [(r["direction"], r["arm"], r["random"]) for r in rows] == [
        (d, arm, d >= 2) for d in range(5) for arm in ("collapse", "p95")
    ]
    assert rows[:4] == plain.summary["goals"]["variants"]
    assert "the random directions' 12 tests another family" in drawn.summary["goals"]["correction"]


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
