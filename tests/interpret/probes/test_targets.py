"""The second goal's offset as a probe target (``end_dx``/``end_dy``, ``corner_dx``/``corner_dy``) and as a
tracked entity, against states parsed step by step in an env played by hand, with the goal cell found by a
plain loop over the first state's grid; planted: on an unedited CoinRun level the end offset is the coin's
(the coin sits on the end cell), on one whose coin was moved it is not."""

import numpy as np
import pytest

import proclab
from level_fixtures import ending_soon
from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs.actions import ACTION_NAMES
from proclab.envs.state import glossary, parse_state, to_pixels
from proclab.errors import ProclabError
from proclab.interpret.probes.targets import RolloutTruth
from proclab.levels.level import Level
from proclab.models.scripted import ScriptedAgent

RIGHT = ACTION_NAMES.index("right")


def walk(level: Level) -> list:
    """The parsed states of ``level``'s episode under always-right, one per step played (the first state,
    then the one after each step but the last)."""
    env = ProcgenVecEnv(
        EnvConfig(game=(level.game,), mode=level.mode, num_envs=1, split="0:1", num_threads=1)
    )
    env.reset()
    env.restart_slots({0: level.state.data})
    states = []
    while True:
        states.append(parse_state(env.slot_states()[0]))
        _, _, terminated, truncated, _ = env.step(np.array([RIGHT]))
        if terminated[0] or truncated[0]:
            env.close()
            return states


def end_by_hand(state) -> tuple[float, float]:
    """CoinRun's end: the rightmost column with a cell that is not wall, its lowest such cell; its centre."""
    names = glossary("coinrun")
    walls = {names.type_of("wall_mid"), names.type_of("wall_top")}
    rows, cols = state.grid.shape
    for col in range(cols - 1, -1, -1):
        for row in range(rows):
            if state.grid[row, col] not in walls:
                return col + 0.5, row + 0.5
    raise AssertionError("no open column")


def corner_by_hand(state) -> tuple[float, float]:
    """Maze's top-right cell: the highest column and the highest row holding an open cell (the maze square's
    corner is always open and nothing outside the square is)."""
    wall = glossary("maze").type_of("wall")
    rows, cols = np.nonzero(state.grid != wall)
    return cols.max() + 0.5, rows.max() + 0.5


def played(levels: list[Level]):
    agent = ScriptedAgent(RIGHT)
    game, mode = levels[0].game, levels[0].mode
    return proclab.rollout(
        agent, game=game, mode=mode, levels=levels, episodes=len(levels), num_envs=len(levels), truth=True
    )


@pytest.mark.parametrize(
    ("game", "mode", "seed", "goal", "by_hand"),
    [("coinrun", "easy", 3, "end", end_by_hand), ("maze", "easy", 5, "corner", corner_by_hand)],
)
def test_second_goal_offset_matches_states_parsed_step_by_step(game, mode, seed, goal, by_hand):
    levels = [ending_soon(Level.generate(game, s, mode=mode), 12) for s in (seed, seed + 1)]
    truth = RolloutTruth(played(levels))
    dx, dy = truth.values(f"{goal}_dx"), truth.values(f"{goal}_dy")
    start = 0
    for level in levels:
        states = walk(level)
        cx, cy = by_hand(states[0])
        rows = slice(start, start + len(states))
        np.testing.assert_allclose(dx[rows], [cx - s.agent.x for s in states], atol=1e-5)
        np.testing.assert_allclose(dy[rows], [cy - s.agent.y for s in states], atol=1e-5)
        assert truth.pixel_positions(goal)[start] == pytest.approx(to_pixels(states[0], cx, cy))
        start += len(states)
    assert start == len(dx)
    assert goal in truth.entities()


def test_end_offset_is_the_coins_on_unedited_levels_and_not_where_the_coin_was_moved():
    plain = ending_soon(Level.generate("coinrun", 7, mode="easy"), 8)
    moved = plain.with_rule("coin-moved")
    truth = RolloutTruth(played([plain, moved]))
    n = truth.lengths
    first, second = slice(0, n[0]), slice(n[0], n[0] + n[1])
    for axis in ("dx", "dy"):
        end, coin = truth.values(f"end_{axis}"), truth.values(f"coin_{axis}")
        np.testing.assert_allclose(end[first], coin[first], atol=1e-5)
        assert end[second][0] == pytest.approx(end[first][0])  # the rule moves the coin, not the end
    assert not np.allclose(truth.values("end_dx")[second], truth.values("coin_dx")[second])


def test_a_game_without_a_second_goal_derives_nothing_and_unknown_names_are_refused():
    level = ending_soon(Level.generate("maze", 2, mode="easy"), 3)
    truth = RolloutTruth(played([level]))
    with pytest.raises(ProclabError, match="corner_dx"):
        truth.values("end_dx")  # the error lists what the maze offers, the derived offset too
    truth.game = "bigfish"  # a game without a pair of goals: no derived target
    assert truth.derived() == [] and "corner" not in truth.entities()
