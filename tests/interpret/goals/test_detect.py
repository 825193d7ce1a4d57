"""``proclab.analyze.goal_calls``: each tool's result gives the call its rule makes from that result's own
blocks (the same call and evidence as the rule applied by hand), a probe result gives both rules when it holds
both inputs, and a result no rule can read is refused rather than answered with "no call"."""

from __future__ import annotations

import dataclasses

import pytest

import proclab
from proclab.errors import ProclabError
from proclab.interpret.goals.detect_probes import probe_call, tracking_call
from proclab.interpret.goals.detect_steering import steering_call, sweep_call
from support import round_trip

CONV = "torso.block1.hook_out"
FC = "torso.hook_fc"


@pytest.fixture(scope="module")
def maze_rollout(maze_agent):
    return proclab.rollout(
        maze_agent, levels="3000000:100", episodes=6, num_envs=6, cache=[CONV, FC], truth=True
    )


def test_probes_give_rule_1_and_rule_2_as_the_rules_by_hand(maze_rollout, tmp_path):
    quick = dict(folds=3, bootstrap=30, permutations=5)
    probes = proclab.analyze.probe(
        maze_rollout,
        FC,
        settings=proclab.analyze.ProbeSettings(targets=proclab.analyze.goal_targets("maze"), **quick),
    )
    tracking = proclab.analyze.probe(
        maze_rollout, CONV,
        settings=proclab.analyze.ProbeSettings(entities=("cheese", "corner"), controls=("random_agent",), **quick),
    )  # fmt: skip
    (call,) = proclab.analyze.goal_calls(probes, "tiny")
    assert dataclasses.asdict(call) == dataclasses.asdict(probe_call(probes.probes, "maze", "tiny"))
    assert set(call.evidence["targets"]) == {"cheese_dx", "cheese_dy", "corner_dx", "corner_dy"}
    (call,) = proclab.analyze.goal_calls(tracking, "tiny")
    assert dataclasses.asdict(call) == dataclasses.asdict(tracking_call(tracking.tracking, "maze", "tiny"))
    both = dataclasses.replace(probes, tracking=tracking.tracking)  # one result holding both rules' inputs
    assert [c.tool for c in proclab.analyze.goal_calls(both, "tiny")] == ["probes", "tracking"]
    for name, result in (("probes", probes), ("tracking", tracking)):  # and the calls read from their folders
        loaded = round_trip(result, tmp_path / name)
        assert proclab.analyze.goal_calls(loaded, "tiny") == proclab.analyze.goal_calls(result, "tiny")


def test_probes_of_other_targets_are_refused_not_answered(maze_rollout):
    settings = proclab.analyze.ProbeSettings(targets=("agent_x",), folds=3, bootstrap=20)
    other = proclab.analyze.probe(maze_rollout, FC, settings=settings)
    with pytest.raises(ProclabError, match="no goal the benchmark's rules read"):
        proclab.analyze.goal_calls(other, "tiny")
    with pytest.raises(ProclabError, match="not Rollout"):
        proclab.analyze.goal_calls(maze_rollout, "tiny")


@pytest.mark.heavy
def test_steering_and_the_sweep_give_rules_3_and_4_as_by_hand(maze_agent, maze_rollout, tmp_path):
    steered = proclab.analyze.steer(
        maze_agent, "torso.block1.hook_out",
        settings=proclab.analyze.SteerSettings(split="6000000:100", levels=3, vector_levels="0:3",
                                               coefficients=(-1.0, 0.0), controls=5, rows=64, bootstrap=50),
    )  # fmt: skip
    (call,) = proclab.analyze.goal_calls(steered, "tiny")
    assert call.tool == "steering"
    want = steering_call(steered.goals, "tiny", entity=steered.entity)
    assert dataclasses.asdict(call) == dataclasses.asdict(want)
    assert call.evidence["random_draws"] == 5 and call.evidence["levels"] == 3
    round_trip(steered, tmp_path / "steer")

    key = FC
    basis = proclab.analyze.fit_basis(maze_rollout, key, settings=proclab.analyze.BasisSettings(n_ics=2))
    swept = proclab.analyze.sweep(
        maze_agent, key, basis=basis, rollout=maze_rollout,
        settings=proclab.analyze.SweepSettings(levels=3, split="6000000:100", arms="p95", goals=True, rows=64,
                                               permutations=20, random_directions=20),
    )  # fmt: skip
    (call,) = proclab.analyze.goal_calls(swept, "tiny")
    assert call.tool == "sweep"
    assert dataclasses.asdict(call) == dataclasses.asdict(sweep_call(swept.summary["goals"], "tiny"))
    assert call.evidence["edits"] == 2 and call.evidence["random_edits_per_arm"] == {"p95": 20}
    round_trip(swept, tmp_path / "sweep")


def test_a_sweep_without_goals_is_refused(maze_agent, maze_rollout):
    key = FC
    basis = proclab.analyze.fit_basis(maze_rollout, key, settings=proclab.analyze.BasisSettings(n_ics=2))
    swept = proclab.analyze.sweep(
        maze_agent, key, basis=basis, rollout=maze_rollout,
        settings=proclab.analyze.SweepSettings(levels=2, split="6000000:100", arms="p95", rows=64, permutations=20),
    )  # fmt: skip
    with pytest.raises(ProclabError, match="goals"):
        proclab.analyze.goal_calls(swept, "tiny")
