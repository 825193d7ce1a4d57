"""Levels as objects: the level procgen plays for a seed, edits that return new levels (the original kept),
each checked against the state functions that ``proclab level edit`` uses, and one-line refusals."""

import matplotlib.figure
import numpy as np
import pytest

from proclab.envs.state import move_entity, parse_state, remove_entities, serialize_state
from proclab.errors import ProclabError
from proclab.levels.file import read_level_states
from proclab.levels.level import Level, as_level_states, generate_level, write_levels
from support import matplotlib_after


@pytest.fixture(scope="module")
def maze():
    return Level.generate("maze", 13)


def test_generate_is_the_level_procgen_plays(maze):
    assert maze.state.data == generate_level("maze", "easy", 13).data
    assert (maze.game, maze.mode, maze.level_seed) == ("maze", "easy", 13)
    assert len(maze.positions("cheese")) == 1


def test_edits_return_new_levels_equal_to_the_state_functions(maze):
    gone = maze.remove("cheese")
    assert len(gone.positions("cheese")) == 0 and len(maze.positions("cheese")) == 1  # the original kept
    assert gone.state.data == serialize_state(remove_entities(parse_state(maze.state.data), "cheese"))
    free = maze.positions("space")
    to = tuple(free[0])
    moved = maze.move("cheese", to)
    np.testing.assert_allclose(moved.positions("cheese")[0], to)
    assert moved.state.data == serialize_state(move_entity(parse_state(maze.state.data), "cheese", to))
    both = maze.add("cheese", to)
    assert len(both.positions("cheese")) == 2
    assert "remove cheese" in gone.state.note and gone.level_seed == 13


def test_a_list_of_levels_is_a_level_file(maze, tmp_path):
    path = write_levels(tmp_path / "maze.levels.json", [maze, maze.remove("cheese")])
    back = read_level_states(path)
    assert [s.data for s in back.states] == [maze.state.data, maze.remove("cheese").state.data]
    assert Level.read(path, 1).state.data == back.states[1].data
    with pytest.raises(ProclabError, match="one game"):
        as_level_states([maze, Level.generate("coinrun", 1)])


def test_bad_edits_are_one_line(maze, tmp_path):
    with pytest.raises(ProclabError, match="cheese"):
        maze.remove("coin")  # maze has no coins: the error lists its kinds
    with pytest.raises(ProclabError):
        maze.remove("cheese").move("cheese", (1.5, 1.5))
    with pytest.raises(ProclabError, match="index"):
        Level.read(write_levels(tmp_path / "one.levels.json", [maze]), 5)


def test_a_goal_or_the_agent_into_a_wall_is_refused_in_one_line(maze):
    wall = tuple(maze.positions("wall")[0])
    for edit in (
        lambda: maze.move("cheese", wall),
        lambda: maze.add("cheese", wall),
        lambda: maze.with_agent_at(wall),
    ):
        with pytest.raises(ProclabError, match=r"is a wall in this maze level; choose an open cell"):
            edit()
    maze.move("cheese", tuple(maze.positions("space")[-1]))  # an open cell is fine
    coinrun = Level.generate("coinrun", 3)
    floor = tuple(coinrun.positions("wall_top")[0])
    with pytest.raises(ProclabError, match="wall_top"):
        coinrun.with_agent_at(floor)


def test_a_level_is_one_short_line_and_shows_itself_as_png(maze):
    assert repr(maze) == "<Level maze easy, level seed 13: 1 cheese, 1 agent>"
    assert repr(maze.remove("cheese")) == "<Level maze easy, level seed 13: 0 cheese, 1 agent>"
    assert isinstance(maze.show(), matplotlib.figure.Figure)
    assert maze._repr_png_().startswith(b"\x89PNG\r\n\x1a\n")


def test_showing_a_level_keeps_the_users_backend_and_never_imports_pyplot(tmp_path):
    draws = """
    from proclab.levels.level import Level
    from proclab.levels.show import show

    level = Level.generate("maze", 13)
    level.show()
    show(level, OUT / "level.png")  # proclab level show's picture
    """
    assert matplotlib_after(draws, tmp_path) == {"backend": "svg", "pyplot": False}
    assert (tmp_path / "level.png").stat().st_size > 10_000
