"""Both goals in the steering result: the vector, the instance control and every random draw, each goal
paired with the plain agent on the same levels, moving as a planted agent's goals move under the vector."""

import pytest

import proclab
from planted_goals import CoinSighted


@pytest.mark.slow  # 30-45 s of play on the loaded 2-core VM (the stopped agent waits out 1,000 steps a level); tests/interpret/goals/test_detect_steering.py covers goal_changes fast
def test_steering_s_goal_columns_move_as_planted():
    """:class:`CoinSighted` runs only while it sees the coin, and its hook is what it sees of the coin:
    subtracting a level's coin vector blinds it, so it loses every coin it took and gains none, while the
    instance control (another thing of the level removed: nothing gold) and the random draws of the same norm change no
    level; it never reaches the end, with or without the vector."""
    settings = proclab.analyze.SteerSettings(
        levels=4, split="1999990000:10000", vector_levels="0:2", coefficients=(-1.0, 0.0), controls=2, rows=32,
        greedy=True, bootstrap=20, level_rule="coin-moved",
    )  # fmt: skip
    res = proclab.analyze.steer(CoinSighted(), "torso.hook_coin", settings=settings, progress=False)
    goals = res.goals
    assert goals["names"] == ["coin", "end"] and goals["levels"] == 4
    assert goals["plain"]["coin"] == pytest.approx(res.coefficients["0"]["level_complete"]["baseline"])
    took = round(goals["plain"]["coin"] * 4)
    assert (
        took >= 2 and goals["plain"]["end"] == 0.0
    )  # the moved coin lies in view of its start on most levels
    arm = goals["coefficients"]["-1"]
    assert (arm["vector"]["coin"]["lost"], arm["vector"]["coin"]["gained"]) == (took, 0)
    assert arm["vector"]["coin"]["intervened"] == 0.0
    for g in ("coin", "end"):
        controls = [arm["instance"][g], *arm["random"][g]["draws"]]
        assert [(t["lost"], t["gained"]) for t in controls] == [(0, 0)] * 3
    assert (arm["vector"]["end"]["lost"], arm["vector"]["end"]["gained"]) == (0, 0)
    assert "2 tests" in goals["correction"]["vector"] and "6 tests" in goals["correction"]["controls"]
