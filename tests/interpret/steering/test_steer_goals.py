"""Both goals in the steering result: the vector, the instance control and every random draw, each goal
paired with the plain agent on the same levels."""

import numpy as np
import pytest
import torch

import proclab
from proclab.envs import EnvConfig
from support import TINY_GRU


@pytest.mark.slow  # about 30 s on the loaded 2-core VM; tests/interpret/goals/test_detect_steering.py covers goal_changes fast
def test_steering_reports_both_goals_of_every_arm():
    torch.manual_seed(0)
    agent = proclab.build_agent(TINY_GRU).eval()
    with torch.no_grad():  # a policy that ignores what it sees: runs or jumps right at random
        agent.heads.policy.weight.zero_()
        agent.heads.policy.bias.fill_(-30.0)
        agent.heads.policy.bias[[7, 8]] = 0.0
    agent.env_config = EnvConfig(game=("coinrun",), mode="easy", split="train")
    settings = proclab.analyze.SteerSettings(
        levels=3, split="100:50", vector_levels="0:2", coefficients=(-1.0, 0.0), controls=2, rows=16,
        greedy=False, bootstrap=20, level_rule="coin-moved:place=floor",
    )  # fmt: skip
    res = proclab.analyze.steer(agent, "torso.block1.hook_out", settings=settings)
    goals = res.goals
    assert goals["names"] == ["coin", "end"] and goals["levels"] == 3
    assert goals["plain"]["coin"] == pytest.approx(res.coefficients["0"]["level_complete"]["baseline"])
    arm = goals["coefficients"]["-1"]
    for g in ("coin", "end"):  # the edits cannot change a policy that ignores them: every arm plays the same
        tests = [arm["vector"][g], arm["instance"][g], *arm["random"][g]["draws"]]
        assert [(t["lost"], t["gained"]) for t in tests] == [(0, 0)] * 4
        assert arm["random"][g]["changes"] == [0.0, 0.0]
    assert np.isclose(goals["plain"]["end"], arm["vector"]["end"]["intervened"])
    assert "2 tests" in goals["correction"]["vector"] and "6 tests" in goals["correction"]["controls"]
