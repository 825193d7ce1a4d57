"""Level-split arithmetic and that environments only visit levels of their split."""

import numpy as np
import pytest

from proclab.envs import NAMED_SPLITS, EnvConfig, LevelSplit, ProcgenVecEnv, check_disjoint, parse_split
from proclab.errors import ProclabError


def test_named_splits_of_the_seeds():
    assert (NAMED_SPLITS["train"].start, NAMED_SPLITS["train"].num) == (0, 200)
    assert (NAMED_SPLITS["train-500"].start, NAMED_SPLITS["train-500"].num) == (0, 500)
    for i, start in enumerate((1000, 1200, 1400), 1):
        s = NAMED_SPLITS[f"test{i}"]
        assert (s.start, s.num) == (start, 200)
    assert not NAMED_SPLITS["all"].bounded


def test_parse_split():
    assert parse_split("1000:200") == LevelSplit(1000, 200)
    assert parse_split(" 5 + 3 ") == LevelSplit(5, 3)
    assert parse_split("test2").start == 1200
    with pytest.raises(ProclabError, match="Did you mean 'test1'"):
        parse_split("tset1")
    with pytest.raises(ProclabError, match=">= 0"):
        parse_split("-5:10")


def test_split_validation():
    with pytest.raises(ProclabError, match="both must be >= 0"):
        LevelSplit(-1, 10)
    with pytest.raises(ProclabError, match="both must be >= 0"):
        LevelSplit(0, -10)
    with pytest.raises(ProclabError, match="unbounded level split must start at 0"):
        LevelSplit(100, 0)
    with pytest.raises(ProclabError, match="exceeds the level-seed space"):
        LevelSplit(2**31 - 5, 10)


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        ((0, 200), (200, 200), False),
        ((0, 201), (200, 200), True),
        ((1000, 200), (1200, 200), False),
        ((1000, 201), (1200, 5), True),
        ((0, 0), (5, 1), True),
        ((50, 10), (0, 1000), True),
    ],
)
def test_overlaps_matches_set_intersection(a, b, overlap):
    sa, sb = LevelSplit(*a), LevelSplit(*b)
    assert sa.overlaps(sb) == sb.overlaps(sa) == overlap
    if sa.bounded and sb.bounded:  # independent check by explicit sets
        assert bool(set(range(sa.start, sa.stop)) & set(range(sb.start, sb.stop))) == overlap


def test_check_disjoint():
    check_disjoint(parse_split("train"), parse_split("test1"))
    check_disjoint(parse_split("train"), parse_split("all"))  # the Procgen "full distribution" test
    with pytest.raises(ProclabError, match=r"overlaps training split .* on levels \[100, 200\)"):
        check_disjoint(parse_split("train"), parse_split("100:500"))


def test_env_draws_levels_inside_its_split():
    env = ProcgenVecEnv(EnvConfig(game=("coinrun",), num_envs=16, split="1000:5"), seed=0)
    _, info = env.reset()
    seen = set(info["level_seed"].tolist())
    rng = np.random.default_rng(0)
    for _ in range(300):
        _, _, _, _, info = env.step(rng.integers(0, 15, 16))
        seen |= set(info["level_seed"].tolist())
    assert seen <= set(range(1000, 1005))
    assert len(seen) >= 3


def test_distinct_levels_are_distinct_seeded_and_inside_the_split():
    from proclab.envs import distinct_levels

    bounded = distinct_levels(LevelSplit(1000, 200), 50, 0)
    assert len(set(bounded)) == 50 and all(1000 <= lv < 1200 for lv in bounded)
    assert list(bounded) == list(distinct_levels(LevelSplit(1000, 200), 50, 0))
    assert list(bounded) != list(distinct_levels(LevelSplit(1000, 200), 50, 1))
    assert sorted(distinct_levels(LevelSplit(5, 10), 10, 3)) == list(range(5, 15))
    assert len(set(distinct_levels(LevelSplit(0, 0), 30, 0))) == 30
    with pytest.raises(ProclabError, match="which has 200"):
        distinct_levels(LevelSplit(1000, 200), 201, 0)
