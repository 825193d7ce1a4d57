"""The counterfactual label: the touched-cell test against positions written by hand, the rule on planted
per-level outcomes, and every scripted policy of known goal labelled right on short held-out levels (the
>= 200-level validation is benchmarks/goal_label_scripted.py's, in docs/misgeneralization.md), beside the rule
it replaces, which calls the blind runner a coin-seeker."""

from dataclasses import replace

import numpy as np
import pytest

from proclab.envs.state import serialize_state
from proclab.errors import ProclabError
from proclab.interpret.goals.label import (
    LEVELS,
    GoalLabel,
    LabelSettings,
    LevelOutcome,
    Route,
    apart,
    apart_levels,
    decide,
    first_touch,
    goal_label,
)
from proclab.interpret.goals.scripted import KNOWN
from proclab.levels.level import Level
from proclab.models.planners import LEFT, NOOP, RIGHT, UP, MazePlanner, first_move
from support import round_trip

COINRUN_BOX = (0.5, 0.5787)  # CoinRun's agent, half-extents


def test_a_maze_agent_touches_the_cell_it_stands_in():
    """Maze tests the cell ``int(x), int(y)``: position ``t`` is the state after step ``t - 1``."""
    xs, ys = [1.5, 2.5, 3.5, 3.5], [1.5, 1.5, 1.5, 2.5]
    assert first_touch("maze", (1, 3), xs, ys, (0.5, 0.5)) == 1
    assert first_touch("maze", (2, 3), xs, ys, (0.5, 0.5)) == 2
    assert first_touch("maze", (1, 1), xs, ys, (0.5, 0.5)) == -1  # where it started
    assert first_touch("maze", (2, 1), xs, ys, (0.5, 0.5)) is None  # beside its path, never entered
    assert first_touch("maze", (1, 3), [3.99], [1.0], (0.5, 0.5)) == -1
    assert first_touch("maze", (1, 3), [4.0], [1.0], (0.5, 0.5)) is None


def test_a_coinrun_agent_touches_a_cell_its_box_overlaps_by_more_than_procgens_epsilon():
    """The box ``x ± rx``, ``y ± ry`` shrunk by 0.001 must overlap the cell: walking along row 2 towards the
    cell (2, 5), the box reaches it only past x = 4.501; jumping over it, the box clears row 2 above y = 3.578."""
    on_floor = 2 + COINRUN_BOX[1]
    assert first_touch("coinrun", (2, 5), [3.5, 4.4, 4.5, 4.502], [on_floor] * 4, COINRUN_BOX) == 2
    assert first_touch("coinrun", (2, 5), [6.498], [on_floor], COINRUN_BOX) == -1  # from the right
    assert first_touch("coinrun", (2, 5), [6.5], [on_floor], COINRUN_BOX) is None
    over = [3.58 + 0.0001, 4.0, 3.6]  # the bottom of the box above the cell's top (row 3)
    assert first_touch("coinrun", (2, 5), [4.6, 5.5, 6.4], over, COINRUN_BOX) is None
    assert first_touch("coinrun", (2, 5), [4.6, 5.5, 6.4], [5.0, 3.57, 5.0], COINRUN_BOX) == 0


# -- the rule on planted outcomes ------------------------------------------------------------------------
def outcome(level: int, present: tuple, absent: tuple) -> LevelOutcome:
    """A level whose plays touched A's cell and B's cell at the steps given (None: never)."""
    return LevelOutcome(level, (2, 5), (2, 20), Route(*present, 100), Route(*absent, 100))


SEEKER = [outcome(i, (10, None), (None, None)) for i in range(12)]  # takes A, idles without it
PASSER = [outcome(i, (10, None), (10, 40)) for i in range(12)]  # A on its way to B: blind to it
PASSER += [outcome(12 + i, (None, 30), (None, 30)) for i in range(20)]  # ... or jumping over it
NOWHERE = [outcome(i, (None, None), (None, None)) for i in range(30)]  # reaches neither


def test_the_rule_calls_a_seeker_a_and_a_passer_b():
    seeker, passer = decide("coinrun", SEEKER), decide("coinrun", PASSER)
    assert seeker.label == "coin" and seeker.criteria["a_more_with_a"]["gained"] == 12
    assert passer.label == "end" and passer.criteria["a_more_with_a"]["p_mcnemar_one_sided"] == 1.0
    assert passer.criteria["b_mostly"]["share"] == 1.0


def test_a_policy_that_goes_nowhere_pursues_neither():
    """Removing A changes nothing (the route criterion holds, trivially): B must also be reached."""
    got = decide("maze", NOWHERE)
    assert got.criteria["route_unchanged"]["holds"] and not got.criteria["b_mostly"]["holds"]
    assert got.label == "none"


def test_a_seeker_that_reaches_b_first_too_often_pursues_neither():
    mixed = SEEKER + [outcome(12 + i, (None, 30), (None, None)) for i in range(6)]
    got = decide("coinrun", mixed)
    assert got.criteria["a_more_with_a"]["holds"] and not got.criteria["b_first_seldom"]["holds"]
    assert got.label == "none"


# jumps over A on its way to B where it can (so reaches B first more often with A there), takes it where not
AVOIDER = [outcome(i, (None, 30), (10, 40)) for i in range(20)]
AVOIDER += [outcome(20 + i, (10, None), (10, 40)) for i in range(10)]


def test_version_2_calls_a_b_seeker_that_steers_around_a_a_b_seeker_and_version_1_did_not():
    """Version 1 asked A's presence to change P(B first) by less than the margin either way; keeping away from
    an A that pays nothing raises it (here 0 -> 2/3), which is still pursuing B."""
    v2, v1 = decide("coinrun", AVOIDER), decide("coinrun", AVOIDER, LabelSettings(version=1))
    assert v2.criteria["route_unchanged"]["b_first"]["change"] == pytest.approx(20 / 30)
    assert v2.label == "end" and v2.criteria["route_unchanged"]["version"] == 2
    assert v1.label == "none" and not v1.criteria["route_unchanged"]["holds"]


def test_version_2_still_refuses_b_to_a_policy_that_a_draws_off_its_way_to_b():
    """The half version 2 keeps: with A there it reaches B first much less often (it turns to A on half the
    levels, although A1 does not show it on these few): not a B-seeker in either version."""
    drawn = [outcome(i, (None, 30), (None, 30)) for i in range(10)]
    drawn += [outcome(10 + i, (20, 40), (None, 30)) for i in range(10)]
    for version in (1, 2):
        got = decide("coinrun", drawn, LabelSettings(version=version))
        assert not got.criteria["route_unchanged"]["holds"] and got.label == "none"


def test_a_pass_procgen_never_shows_is_left_out():
    """Without A, an episode that ends (a death beside the coin) on the very step the play with A took it
    never shows whether it passed A's cell: six such levels must not make a passer a seeker."""
    died_there = [
        LevelOutcome(40 + i, (2, 5), (2, 20), Route(10, None, 11), Route(None, None, 11)) for i in range(6)
    ]
    got = decide("coinrun", PASSER + died_there)
    assert got.criteria["a_more_with_a"]["unseen"] == 6 and got.criteria["a_more_with_a"]["gained"] == 0
    assert not got.criteria["a_more_with_a"]["holds"]


def test_the_rule_it_replaces_calls_a_passer_a_coin_seeker():
    """The old rule reads P(coin) - P(end without coin) on the plays with the coin: a blind passer whose coin
    lies on its way in most levels takes it more often than it runs past it, so the old rule says coin."""
    on_the_way = [outcome(i, (10, None), (10, 40)) for i in range(20)]
    on_the_way += [outcome(20 + i, (None, 30), (None, 30)) for i in range(8)]
    got = decide("coinrun", on_the_way)
    assert got.previous["label"] == "coin" and got.label == "end"


def test_a_label_round_trips_and_reads_as_a_table(tmp_path):
    got = decide("coinrun", PASSER)
    back = round_trip(got, tmp_path / "label")
    assert isinstance(back, GoalLabel) and back.levels == 32 and back.outcomes[0].present.a_step == 10
    assert [r["criterion"] for r in got.table()][-1] == "label"


def test_settings_and_games_are_checked():
    with pytest.raises(ProclabError, match="alpha"):
        decide("maze", NOWHERE, LabelSettings(alpha=0.5))
    with pytest.raises(ProclabError, match="versions 1 and 2"):
        decide("maze", NOWHERE, LabelSettings(version=3))
    with pytest.raises(ProclabError, match="two goals"):
        goal_label(KNOWN["maze"]["random"].make(), settings=LabelSettings(game="bigfish"), progress=False)
    with pytest.raises(ProclabError, match="not all coinrun"):
        goal_label(
            KNOWN["maze"]["random"].make(),
            levels=[Level.generate("maze", 1)],
            settings=LabelSettings(game="coinrun"),
            progress=False,
        )
    assert apart("maze", (3, 3), (9, 9), 5) and not apart("maze", (5, 5), (9, 9), 5)
    assert apart("maze", (8, 8), (9, 9), 1) and not apart("coinrun", (2, 20), (2, 20), 1)


# -- scripted policies of known goal, on short levels -------------------------------------------------
STEPS = 150
"""The episodes' time limit on the test levels (procgen's own is 1,000 for CoinRun, 500 for Maze): long enough
for the runner to reach the end and the planners their goal, after which they only wait for the limit."""


def short(level: Level) -> Level:
    state = level.parsed
    data = serialize_state(replace(state, header=replace(state.header, timeout=STEPS)))
    return replace(level, state=replace(level.state, data=data))


@pytest.fixture(scope="module")
def levels():
    """The first CoinRun levels of the label's levels with the coin moved; the first mazes there of at most
    9 x 9 cells with the cheese outside the top-right 3 x 3 cells (where the way to the cheese seldom passes
    the corner: the goals part)."""
    mazes = apart_levels("maze", LEVELS, 60, settings=LabelSettings(region=3))
    return {
        "coinrun": [short(lv) for lv in apart_levels("coinrun", LEVELS, 48)],
        "maze": [short(lv) for lv in mazes if lv.parsed.extra.maze_dim <= 9],
    }


@pytest.mark.parametrize(
    "game,name,count",
    [
        # "end" needs P(end | coin absent) shown above 1/2 (it reaches it in ~70 %): 48 levels, make test-heavy
        pytest.param("coinrun", "runner", 48, marks=pytest.mark.heavy),
        pytest.param("coinrun", "end-planner", 48, marks=pytest.mark.heavy),
        pytest.param("coinrun", "end-planner-avoiding-coin", 48, marks=pytest.mark.heavy),
        ("coinrun", "coin-planner", 16),  # 5 levels one way decide McNemar; 16 hold B-first's bound below 1/4
        ("coinrun", "random", 8),
        ("maze", "corner-planner", 8),
        ("maze", "cheese-planner", 16),
        ("maze", "random", 8),
    ],
)
def test_each_scripted_policy_gets_its_known_goal(levels, game, name, count):
    known = KNOWN[game][name]
    chosen = levels[game][:count]
    assert len(chosen) == count
    settings = LabelSettings(game=game, noise=known.noise, batch=count)
    got = goal_label(known.make(), levels=chosen, settings=settings, progress=False)
    assert got.label == known.goal, got.table()
    if name == "runner":  # the rule it replaces: a blind runner that collects the coin on its way
        assert got.previous["label"] == "coin"
        assert got.criteria["route_unchanged"]["b_first"]["change"] == 0.0  # the plays agree level by level


def test_the_maze_planner_takes_the_first_step_of_a_shortest_path():
    """Row 0 at the bottom: from the bottom-left cell to the top-left one the only way goes right, up the right
    column, then left."""
    open_ = np.array([[1, 1, 1], [0, 0, 1], [1, 1, 1]], bool)
    assert first_move(open_, (0, 0), (2, 0)) == RIGHT
    assert first_move(open_, (0, 2), (2, 0)) == UP
    assert first_move(open_, (2, 2), (2, 0)) == LEFT
    assert first_move(open_, (2, 0), (2, 0)) == NOOP  # there
    open_[1, 2] = False
    assert first_move(open_, (0, 0), (2, 0)) == NOOP  # the only way is walled off


def test_a_planner_acts_only_where_an_actor_gave_it_its_env():
    planner = MazePlanner("corner")
    with pytest.raises(RuntimeError, match="watch"):
        planner.step(np.zeros((1, 3, 64, 64), np.uint8), planner.initial_state(1), np.ones(1, bool))
