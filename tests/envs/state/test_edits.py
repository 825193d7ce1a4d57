"""Edited levels play as edited, in the real game: procgen's ``set_state`` loads the edited bytes and
scripted actions play them. Levels are picked by what their start state shows (free cells, the goal
far away), never by how the test turns out."""

import numpy as np
import pytest

from proclab.envs._procgen import ProcgenBackend
from proclab.envs.actions import NOOP
from proclab.envs.state import (
    add_entity,
    glossary,
    move_agent,
    move_entity,
    parse_state,
    positions,
    remove_entities,
    serialize_state,
)
from proclab.envs.state.glossary import SPACE
from proclab.errors import ProclabError

RIGHT, LEFT, UP, DOWN = 7, 1, 5, 3


def _start_states(game: str, count: int):
    """First states of levels 0, 1, 2, ... (easy), as parsed states."""
    for level in range(count):
        backend = ProcgenBackend(
            1, game, distribution_mode="easy", num_levels=1, start_level=level, rand_seed=0
        )
        try:
            yield parse_state(backend.get_state()[0])
        finally:
            backend.close()


def _play(state, actions) -> list[float]:
    """Load ``state`` into a fresh env, play ``actions``; the rewards (the list stops at the episode end)."""
    backend = ProcgenBackend(
        1, state.game, distribution_mode="easy", num_levels=0, start_level=0, rand_seed=0
    )
    try:
        backend.set_slot_state(0, serialize_state(state))
        rewards = []
        for action in actions:
            backend.act(np.array([action], dtype=np.int32))
            _, reward, first, _ = backend.observe()
            rewards.append(float(reward[0]))
            if first[0]:
                break
        return rewards
    finally:
        backend.close()


def _coinrun_level_with_a_clear_run():
    """A coinrun start whose next two cells to the right are empty, with nothing else within 4 units and
    the coin more than 8 units away (the first wall stops a run to the right before it)."""
    for state in _start_states("coinrun", 40):
        agent = state.agent
        col, row = int(agent.x), int(agent.y)
        others = [e for e in state.entities if e.type != 0 and np.hypot(e.x - agent.x, e.y - agent.y) < 4]
        coin = positions(state, "coin")[0]
        if np.all(state.grid[row, col + 1 : col + 3] == SPACE) and not others and coin[0] - agent.x > 8:
            return state
    pytest.fail("no coinrun level with a clear run to the right among the first 40")


def test_coinrun_moved_coin_pays_where_it_was_moved_to():
    state = _coinrun_level_with_a_clear_run()
    agent = state.agent
    moved = move_entity(state, "coin", (agent.x + 2, agent.y))
    assert sum(_play(state, [RIGHT] * 12)) == 0  # the original coin is out of reach
    rewards = _play(moved, [RIGHT] * 12)
    assert rewards[-1] == 10 and sum(rewards) == 10  # the moved coin ends the level with its reward


def test_coinrun_removed_coin_is_gone():
    state = _coinrun_level_with_a_clear_run()
    coin_x, coin_y = positions(state, "coin")[0]
    on_coin = move_agent(state, (coin_x, coin_y))
    assert _play(on_coin, [NOOP] * 3)[0] == 10  # control: standing on the coin pays at once
    removed = remove_entities(on_coin, "coin")
    assert len(positions(removed, "coin")) == 0
    assert sum(_play(removed, [NOOP] * 3)) == 0


def _maze_step_toward_a_free_neighbour():
    """A maze start with a free cell next to the agent and the cheese more than 4 cells away; the
    action towards that cell."""
    for state in _start_states("maze", 40):
        col, row = int(state.agent.x), int(state.agent.y)
        cheese = positions(state, "cheese")[0]
        if np.abs(cheese - (state.agent.x, state.agent.y)).sum() <= 4:
            continue
        for action, (dc, dr) in ((RIGHT, (1, 0)), (LEFT, (-1, 0)), (UP, (0, 1)), (DOWN, (0, -1))):
            if state.grid[row + dr, col + dc] == SPACE:
                return state, action, (col + dc + 0.5, row + dr + 0.5)
    pytest.fail("no maze level with a free neighbour cell among the first 40")


def test_maze_moved_cheese_pays_where_it_was_moved_to():
    state, action, neighbour = _maze_step_toward_a_free_neighbour()
    moved = move_entity(state, "cheese", neighbour)
    assert sum(_play(state, [action] * 4)) == 0
    rewards = _play(moved, [action] * 4)
    assert rewards[-1] == 10 and sum(rewards) == 10
    # the old cheese cell is empty, the new one holds the cheese
    assert np.array_equal(positions(moved, "cheese"), [neighbour])


def test_edits_survive_procgen_set_state():
    """What procgen reads back from edited bytes is the edit: get_state after set_state parses to it."""
    state = next(_start_states("coinrun", 1))
    saw = (state.agent.x + 2, state.agent.y + 3)
    edited = add_entity(move_agent(state, (state.agent.x + 1, state.agent.y + 0.25)), "saw", saw)
    backend = ProcgenBackend(1, "coinrun", distribution_mode="easy", num_levels=0, start_level=0, rand_seed=0)
    try:
        backend.set_slot_state(0, serialize_state(edited))
        back = parse_state(backend.get_state()[0])
    finally:
        backend.close()
    assert (back.agent.x, back.agent.y) == pytest.approx((state.agent.x + 1, state.agent.y + 0.25))
    assert positions(back, "saw").tolist()[-1] == pytest.approx(list(saw))
    assert back.entities == edited.entities and np.array_equal(back.grid, edited.grid)


def test_cell_and_entity_edits_keep_the_rest_and_the_level_counts():
    climber = next(_start_states("climber", 1))
    coins = positions(climber, "coin")
    fewer = remove_entities(climber, "coin", where=lambda x, y: y > coins[:, 1].min())
    assert len(positions(fewer, "coin")) == int(np.sum(coins[:, 1] == coins[:, 1].min()))
    assert fewer.extra.coin_quota == climber.extra.coin_quota - (len(coins) - len(positions(fewer, "coin")))
    assert len(fewer.entities) == len(climber.entities) - (len(coins) - len(positions(fewer, "coin")))
    maze = next(_start_states("maze", 1))
    wall = glossary("maze").type_of("wall")
    assert np.array_equal(remove_entities(maze, "cheese").grid == wall, maze.grid == wall)
    cheese = glossary("maze").type_of("cheese")
    assert parse_state(serialize_state(add_entity(maze, "cheese", (0.5, 0.5)))).grid[0, 0] == cheese


def test_bad_edits_are_refused_in_one_line():
    state = next(_start_states("coinrun", 1))
    with pytest.raises(ProclabError, match="outside the coinrun level"):
        move_agent(state, (-1, 2))
    with pytest.raises(ProclabError, match="unknown kind for coinrun 'cheese'"):
        remove_entities(state, "cheese")
    with pytest.raises(ProclabError, match="index 5 does not exist"):
        move_entity(state, "coin", (2, 2), index=5)
    with pytest.raises(ProclabError, match="cannot be removed"):
        remove_entities(state, "agent")


def test_cell_moves_onto_itself_and_repeated_adds_keep_the_cell_and_the_count():
    maze = next(_start_states("maze", 1))
    cheese = positions(maze, "cheese")[0]
    assert np.array_equal(move_entity(maze, "cheese", cheese).grid, maze.grid)
    chaser = next(_start_states("chaser", 1))
    orb = positions(chaser, "orb")[0]
    assert add_entity(chaser, "orb", orb).extra.total_orbs == chaser.extra.total_orbs
    emptied = remove_entities(chaser, "orb", where=lambda x, y: (x, y) == tuple(orb))
    assert emptied.extra.total_orbs == chaser.extra.total_orbs - 1
    assert add_entity(emptied, "orb", orb) == chaser


def test_chaser_with_one_orb_left_completes_when_it_is_eaten():
    """The orb count follows the edit: with every orb but one removed, eating that one ends the level."""
    orb = glossary("chaser").type_of("orb")
    for state in _start_states("chaser", 10):
        col, row = int(state.agent.x), int(state.agent.y)
        height, width = state.grid.shape
        for action, (dc, dr) in ((RIGHT, (1, 0)), (LEFT, (-1, 0)), (UP, (0, 1)), (DOWN, (0, -1))):
            if 0 <= col + dc < width and 0 <= row + dr < height and state.grid[row + dr, col + dc] == orb:
                target = (col + dc, row + dr)
                one = remove_entities(state, "orb", where=lambda x, y, keep=target: (int(x), int(y)) != keep)
                assert len(positions(one, "orb")) == 1 and one.extra.total_orbs == 1
                assert max(_play(state, [action] * 6)) < 1  # unedited: small orb rewards only
                assert _play(one, [action] * 6)[-1] == pytest.approx(
                    10.04
                )  # the orb and the completion bonus
                return
    pytest.fail("no chaser level with an orb next to the agent among the first 10")
