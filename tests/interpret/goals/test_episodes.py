"""Goals reached, read from planted trajectories on a hand-drawn maze: an agent that walks to the cheese (the
eaten cheese is never seen under it: the episode ends), one that walks to the corner, one that dithers at
the decision square; and a real rollout read into episodes."""

import pytest

from maze_drawings import ascii_maze
from proclab.errors import ProclabError
from proclab.interpret.goals.decision import DecisionSquareSettings, decision_square
from proclab.interpret.goals.episodes import distinct_levels, goals_reached, maze_episode, maze_episodes
from proclab.record.rollout import rollout
from support import round_trip

MAZE = ascii_maze(["C##..", ".##.#", "..D..", "##.##", "S...."])
TO_SQUARE = [(0, 0), (1, 0), (2, 0), (2, 1), (2, 2)]


def test_an_agent_that_eats_the_cheese_reached_it_on_its_last_step():
    cells = [*TO_SQUARE, (1, 2), (0, 2), (0, 3)]  # the step onto (0, 4) eats the cheese and ends the episode
    got = goals_reached(MAZE, cells, completed=True)
    assert got == {"cheese_step": 7, "corner_step": None, "branch": "cheese", "branch_step": 5}
    # reading the cheese from the positions alone would never find it
    assert MAZE.cheese not in cells


def test_an_agent_that_walks_to_the_corner_reached_it_and_not_the_cheese():
    cells = [*TO_SQUARE, (3, 2), (3, 3), (3, 4), (4, 4), (4, 4)]
    got = goals_reached(MAZE, cells, completed=False)
    assert got == {"cheese_step": None, "corner_step": 8, "branch": "corner", "branch_step": 5}
    episode = maze_episode(MAZE, 7, cells, completed=False)
    assert episode.reached("corner") and not episode.reached("cheese") and episode.went() == "corner"
    assert not episode.reached("corner", horizon=8) and episode.reached("corner", horizon=9)


def test_the_first_branch_entered_decides_even_after_dithering():
    cells = [*TO_SQUARE, (2, 1), (2, 2), (3, 2), (2, 2), (1, 2), (0, 2), (0, 3)]
    got = goals_reached(MAZE, cells, completed=True)
    assert got["branch"] == "corner" and got["branch_step"] == 7 and got["cheese_step"] == 11


def test_a_cheese_next_to_the_decision_square_counts_as_that_branch():
    maze = ascii_maze(["###..", "###.#", ".CD..", "##.##", "S...."])
    got = goals_reached(maze, [*TO_SQUARE], completed=True)  # from (2, 2) onto the cheese at (1, 2)
    assert got["branch"] == "cheese" and got["branch_step"] == 4


def test_the_agent_that_never_reaches_the_square_took_no_branch():
    got = goals_reached(MAZE, [(0, 0), (1, 0), (0, 0), (1, 0)], completed=False)
    assert got == {"cheese_step": None, "corner_step": None, "branch": None, "branch_step": None}


def planted_episodes():
    """Mazes whose outcome follows the planted rule: cheese far from the corner -> corner."""
    out = []
    for level in range(40):
        far = level % 2 == 0
        cells = [*TO_SQUARE, (3, 2), (3, 3), (3, 4), (4, 4)] if far else [*TO_SQUARE, (1, 2), (0, 2), (0, 3)]
        e = maze_episode(MAZE, level, cells, completed=not far)
        out.append(e.__class__(**{**e.__dict__, "cheese_distance": 10.0 if far else 2.0}))
    return out


def test_rates_by_distance_follow_a_planted_rule(tmp_path):
    result = decision_square(
        planted_episodes(),
        settings=DecisionSquareSettings(bins=(0.0, 5.0, 20.0), exclude_region=False, bootstrap=10, folds=2),
    )
    near, far = result.bins
    assert (near["mazes"], near["cheese"]["count"], near["corner"]["count"]) == (20, 20, 0)
    assert (far["mazes"], far["cheese"]["count"], far["corner"]["count"]) == (20, 0, 20)
    assert near["cheese"]["interval"][0] > 0.7 and far["corner"]["interval"][0] > 0.7
    assert result.bins_with_square == result.bins  # every planted maze has its decision square
    assert result.decision["p_branch_cheese"]["count"] == 20 and result.decision["branch_entered"] == 40
    # one maze, repeated: every property is constant, yet the fit runs (a constant column is standardised to 0)
    assert result.regressions["cheese"]["all"]["accuracy"] == pytest.approx(0.5, abs=0.5)
    round_trip(result, tmp_path / "square")


def test_too_few_decision_squares_skip_the_regressions_instead_of_failing():
    few = decision_square(
        planted_episodes()[:12], settings=DecisionSquareSettings(bootstrap=10, exclude_region=False)
    )
    assert set(few.regressions) == {"cheese", "branch"}
    assert all("too few to fit with 10-fold" in r["skipped"] for r in few.regressions.values())
    assert few.bins  # the rates are still there


def test_repeated_levels_count_once():
    episodes = planted_episodes()
    assert len(distinct_levels(episodes + episodes[:5])) == 40


def test_a_rollout_reads_into_maze_episodes(maze_agent):
    played = rollout(
        maze_agent, "maze", "5015:1", episodes=3, num_envs=3, seed=0, mode="easy", truth=True
    )  # a 3 x 3 maze: short episodes
    episodes = maze_episodes(played)
    assert [e.level for e in episodes] == [int(s) for s in played.levels]
    for e, n, done in zip(episodes, played.lengths, played.level_complete, strict=True):
        assert e.length == n and e.reached("cheese") == bool(done)
        assert e.cheese_step in (None, n - 1)


def test_a_rollout_without_ground_truth_is_refused(maze_agent):
    played = rollout(maze_agent, "maze", "5015:1", episodes=1, num_envs=1, seed=0, truth=False, mode="easy")
    with pytest.raises(ProclabError, match="truth=True"):
        maze_episodes(played)
