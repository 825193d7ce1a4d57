"""Both goals in the steering result: the vector, the instance control and every random draw, each goal
paired with the plain agent on the same levels, moving as a planted agent's goals move under the vector."""

import numpy as np
import pytest
import torch

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


@pytest.mark.heavy  # 17-25 s: the played level's agent never sees the coin and waits out 1,000 steps per variant
def test_a_vector_built_under_another_level_rule_is_the_mean_over_those_levels_by_hand():
    """``vector_level_rule``: the vector's levels edited by their own rule while the levels played are not.
    CoinSighted's hook is the coin's pixels, so the mean vector over levels whose coin was moved is the mean of
    their first frames' coin masks (the moved coin is in view of the start on most), computed here from the
    levels themselves; built from the standard levels (the coin at the end, out of view) it is zero."""
    from planted_goals import coin_mask

    def steered(vector_rule):
        settings = proclab.analyze.SteerSettings(
            levels=1, split="1999990000:10000", vector_levels="0:3", coefficients=(-1.0, 0.0), controls=0, rows=8,
            greedy=True, bootstrap=20, level_rule="none", per_level=False, vector_level_rule=vector_rule,
        )  # fmt: skip
        return proclab.analyze.steer(CoinSighted(), "torso.hook_coin", settings=settings, progress=False)

    moved = [proclab.Level.generate("coinrun", s).with_rule("coin-moved") for s in range(3)]
    masks = []
    for lv in moved:
        with_coin = torch.from_numpy(lv.frames()[0].transpose(2, 0, 1)[None].copy())
        without = torch.from_numpy(lv.remove("coin").frames()[0].transpose(2, 0, 1)[None].copy())
        masks.append(coin_mask(with_coin).float() - coin_mask(without).float())
    expected = torch.cat(masks).mean(0).numpy()
    assert expected.sum() > 0
    vector = steered("coin-moved").vector
    np.testing.assert_allclose(vector, expected.reshape(vector.shape))
    assert not steered(None).vector.any()
