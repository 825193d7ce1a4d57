"""Both goals per episode (proclab.envs.state.goals): the per-step tracker against a plain recomputation from
every state parsed in full, on real episodes of a random agent, and planted levels whose answer is known."""

import math

import numpy as np
import pytest

from level_fixtures import ending_soon
from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs.actions import ACTION_NAMES, NOOP
from proclab.envs.state import GoalTracker, corner_cell, end_cell, episode_goals, goal_names, parse_state
from proclab.levels.level import Level, as_level_states
from proclab.levels.play import LevelsEnv

RIGHT = ACTION_NAMES.index("right")
COINRUN_WALLS = (15, 16)  # coinrun.cpp's WALL_MID, WALL_TOP
COIN, CHEESE, MAZE_WALL = 1, 2, 51


def reference_goals(states, completed: bool) -> dict[str, bool]:
    """The goals recomputed plainly from the episode's states (first, then after each step but the last)."""
    first = states[0]
    grid = first.grid
    height, width = grid.shape
    if first.game == "coinrun":
        col = width - 1
        while all(grid[r, col] in COINRUN_WALLS for r in range(height)):
            col -= 1
        row = 0
        while grid[row, col] in COINRUN_WALLS:
            row += 1

        def touches(a) -> bool:  # the cell [col, col + 1] x [row, row + 1] against the box shrunk by 0.001
            return (
                col <= a.x + a.rx - 0.001
                and a.x - a.rx + 0.001 < col + 1
                and row <= a.y + a.ry - 0.001
                and a.y - a.ry + 0.001 < row + 1
            )

        end = any(touches(s.agent) for s in states) or (completed and grid[row, col] == COIN)
        return {"coin": completed, "end": end}
    open_rows = [r for r in range(height) if any(grid[r, c] != MAZE_WALL for c in range(width))]
    row = max(open_rows)
    col = max(c for c in range(width) if grid[row, c] != MAZE_WALL)
    corner = any(math.floor(s.agent.x) == col and math.floor(s.agent.y) == row for s in states)
    return {"cheese": completed, "corner": corner or (completed and grid[row, col] == CHEESE)}


def play(env, actions, steps: int, parse: bool = True):
    """Step ``env`` with ``actions(step)``; per finished episode: the tracker's goals, and with ``parse`` the
    definition's (episode_goals) and the plain recomputation's from every state parsed in full."""
    env_states = env.slot_states()
    tracker = GoalTracker(env.games, env.game_index, env_states)
    episodes = [[parse_state(s)] if parse else [] for s in env_states]
    out = []
    for t in range(steps):
        _, _, terminated, truncated, info = env.step(actions(t))
        states = env.slot_states()
        ended, complete = terminated | truncated, info["episode"]["level_complete"]
        reached = tracker.step(states, ended, complete)
        for i in range(env.num_envs):
            seen = episodes[i]
            if ended[i] and parse:
                defined = episode_goals(seen[0], seen[1:], bool(complete[i]))
                out.append((reached[i], defined, reference_goals(seen, complete[i])))
            elif ended[i]:
                out.append((reached[i],))
            if parse:
                episodes[i] = [parse_state(states[i])] if ended[i] else [*seen, parse_state(states[i])]
    return out


def small_mazes(count: int) -> list[Level]:
    """Generated mazes of at most 5 x 5 cells: a random walk ends their episodes within a few dozen steps."""
    levels = (Level.generate("maze", seed, mode="easy") for seed in range(100))
    return [level for level in levels if level.parsed.extra.maze_dim <= 5][:count]


@pytest.mark.parametrize("game", ["coinrun", "maze"])
def test_the_tracker_agrees_with_a_plain_recomputation_on_random_play(game):
    """A random agent on real levels: CoinRun's leaning right and up (so that a few episodes end in the
    steps played: levels completed, deaths), Maze's on small mazes, every action."""
    rng = np.random.default_rng(1)
    if game == "coinrun":
        config = EnvConfig(game=(game,), mode="easy", num_envs=6, split="0:40", num_threads=1)
        env, choices = (
            ProcgenVecEnv(config, seed=3),
            [ACTION_NAMES.index(a) for a in ("up", "right", "up-right", "down-right")],
        )
    else:
        config = EnvConfig(game=(game,), mode="easy", num_envs=4, split="0:1", num_threads=1)
        env, choices = LevelsEnv(ProcgenVecEnv(config), as_level_states(small_mazes(8))), list(range(9))
    with env:
        env.reset()
        played = play(env, lambda t: rng.choice(choices, env.num_envs), 120)
    assert len(played) >= 5, "too few episodes ended to test anything"
    for tracked, defined, reference in played:
        assert tracked == defined == reference
    place = goal_names(game)[1]
    assert any(r[place] for _, _, r in played) and not all(r[place] for _, _, r in played)
    if game == "coinrun":  # on unedited levels the coin sits on the end cell: the two goals are one
        assert all(r["coin"] == r["end"] for _, _, r in played)


def play_level(level: Level, action: int, steps: int = 30):
    """The tracker's goals of ``level``'s first episode, always pressing ``action`` (its clock set ``steps``
    steps before the time limit, so that it ends by then)."""
    config = EnvConfig(game=(level.game,), mode=level.mode, num_envs=1, split="0:1", num_threads=1)
    with LevelsEnv(ProcgenVecEnv(config), as_level_states([ending_soon(level, steps)])) as env:
        env.reset()
        played = play(env, lambda t: np.array([action]), steps, parse=False)
    return played[0][0]


def coinrun_level():
    level = Level.generate("coinrun", 4, mode="easy")
    row, col = end_cell(level.parsed.grid)
    assert level.parsed.grid[row, col] == COIN  # generated: the coin on the end cell
    return level, row, col


def test_coinrun_the_end_reached_with_the_coin_moved_away():
    level, row, col = coinrun_level()
    start = (level.parsed.agent.x, level.parsed.agent.y)
    near_end = level.with_agent_at((col - 1.5, row + level.parsed.agent.ry))
    moved = near_end.move("coin", (start[0] + 1, start[1]))  # the coin by the start, far from the agent
    assert end_cell(moved.parsed.grid) == (row, col) and moved.parsed.grid[row, col] != COIN
    assert play_level(moved, RIGHT) == {"coin": False, "end": True}
    # standing still right beside the end cell, the box's right edge on the cell's left edge: not touched
    # (procgen's collision shrinks the box by 0.001; an overlap test with <= or a grown box says touched)
    beside = moved.with_agent_at((col - level.parsed.agent.rx, row + level.parsed.agent.ry))
    assert play_level(beside, NOOP) == {"coin": False, "end": False}
    # the same level with the coin left in place: running right takes it, and the end with it (on the last
    # step, whose position is never seen: counted because the coin sits on the end cell)
    assert play_level(near_end, RIGHT) == {"coin": True, "end": True}
    # an agent that never moves from the start reaches neither
    assert play_level(level, NOOP) == {"coin": False, "end": False}


def maze_level():
    """A generated maze whose corner's left neighbour is open (so pressing right from it enters the corner)."""
    for seed in range(50):
        level = Level.generate("maze", seed, mode="easy")
        row, col = corner_cell(level.parsed)
        if level.parsed.grid[row, col - 1] != MAZE_WALL and level.parsed.grid[row, col] != CHEESE:
            return level, row, col
    raise AssertionError("no maze with an open cell left of its corner in 50 seeds")


def test_maze_the_corner_reached_with_and_without_the_cheese_there():
    level, row, col = maze_level()
    beside = level.with_agent_at((col - 0.5, row + 0.5))
    assert play_level(beside, RIGHT) == {"cheese": False, "corner": True}
    assert play_level(beside, NOOP) == {"cheese": False, "corner": False}  # next to it is not in it
    # the cheese in the corner: entering it completes the level on a step whose state is never seen
    in_corner = beside.move("cheese", (col + 0.5, row + 0.5))
    assert play_level(in_corner, RIGHT) == {"cheese": True, "corner": True}
    assert play_level(level, NOOP) == {"cheese": False, "corner": False}


def test_games_without_goals_track_nothing():
    assert goal_names("bigfish") == ()
    config = EnvConfig(game=("bigfish", "maze"), mode="easy", num_envs=2, split="0:5", num_threads=1)
    with ProcgenVecEnv(config) as env:
        env.reset()
        tracker = GoalTracker(env.games, env.game_index, env.slot_states())
        assert tracker.names == ["cheese", "corner"] and tracker.slots == [
            int(np.flatnonzero(env.game_index == 1)[0])
        ]
        assert tracker.row({}) == {"cheese": False, "corner": False}


@pytest.mark.parametrize("mode", ["easy", "hard"])
def test_generated_levels_hold_the_coin_on_the_end_cell_and_an_open_corner(mode):
    """What the definitions lean on, over 32 generated levels of each game: CoinRun's coin is on its end
    cell (so coin implies end on unedited levels), and the maze's top-right cell is open."""
    for game in ("coinrun", "maze"):
        config = EnvConfig(game=(game,), mode=mode, num_envs=32, split="0:100000", num_threads=1)
        with ProcgenVecEnv(config, seed=7) as env:
            env.reset()
            states = [parse_state(s) for s in env.slot_states()]
        for state in states:
            if game == "coinrun":
                assert [tuple(c) for c in np.argwhere(state.grid == COIN)] == [end_cell(state.grid)]
            else:
                assert state.grid[corner_cell(state)] != MAZE_WALL
