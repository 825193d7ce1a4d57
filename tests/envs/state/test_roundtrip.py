"""Parsing and serializing real procgen states: byte-identical round trips, refusals, header facts."""

import struct

import numpy as np
import pytest

from proclab.envs._procgen import ProcgenBackend
from proclab.envs.games import GAMES, games_for_mode
from proclab.envs.state import GameState, glossary, parse_state, serialize_state
from proclab.envs.state.sample import random_states
from proclab.errors import ProclabError


@pytest.mark.parametrize("mode", ["easy", "hard"])
@pytest.mark.parametrize("game", GAMES)
def test_round_trip_is_byte_identical(game, mode):
    for i, data in enumerate(random_states(game, mode, count=24, seed=GAMES.index(game))):
        state = parse_state(data)
        assert isinstance(state, GameState) and state.game == game
        assert serialize_state(state) == data, f"{game} {mode} state {i} differs after a round trip"
        assert state.agent.type == 0 and state.agent.kind == "agent"
        assert state.grid.shape == (state.basic.main_height, state.basic.main_width)
        # the glossary names everything the game produces
        assert not [e.kind for e in state.entities if e.kind.startswith("type")]
        assert set(np.unique(state.grid).tolist()) <= set(glossary(game).cells)


OTHER_MODES = [(g, m) for m in ("extreme", "memory", "exploration") for g in games_for_mode(m)]


@pytest.mark.parametrize(("game", "mode"), OTHER_MODES)
def test_round_trip_in_the_other_modes(game, mode):
    for data in random_states(game, mode, count=8, seed=5):
        assert serialize_state(parse_state(data)) == data


def _first_state(game="coinrun") -> bytes:
    return next(random_states(game, "easy", count=1, keep_prob=1.0))


def test_other_serialization_version_is_refused_in_one_line():
    data = bytearray(_first_state())
    data[:4] = struct.pack("<i", 1)
    with pytest.raises(ProclabError, match="version 1") as caught:
        parse_state(bytes(data))
    assert "\n" not in str(caught.value)


def test_unknown_game_and_damaged_bytes_are_refused():
    data = _first_state()
    renamed = data[:8] + b"coinrux" + data[15:]
    with pytest.raises(ProclabError, match="unknown game 'coinrux'"):
        parse_state(renamed)
    with pytest.raises(ProclabError, match="truncated"):
        parse_state(data[:-100])
    with pytest.raises(ProclabError, match="does not end"):
        parse_state(data + b"\0\0\0\0")


def test_header_agrees_with_what_procgen_reports():
    """Independent facts: the level seed procgen's info reports, and the options the env was made with."""
    backend = ProcgenBackend(
        3, "maze", distribution_mode="hard", num_levels=50, start_level=1000, rand_seed=7
    )
    try:
        backend.act(np.zeros(3, dtype=np.int32))
        seeds = np.array(backend.observe()[3]["level_seed"])  # every backend's info buffers
        for data, seed in zip(backend.get_state(), seeds, strict=True):
            header = parse_state(data).header
            assert header.current_level_seed == seed
            assert header.distribution_mode == 1  # procgen's HardMode
            assert 1000 <= header.current_level_seed < 1050
            assert header.cur_time == 1
    finally:
        backend.close()


def test_grid_cells_are_read_where_procgen_writes_them():
    """The grid is the last BasicAbstractGame field: its cells sit right before maze's two ints and the end marker."""
    data = _first_state("maze")
    state = parse_state(data)
    height, width = state.grid.shape
    tail = np.frombuffer(data[-(4 * (width * height) + 12) : -12], dtype="<i4")
    assert np.array_equal(tail, state.grid.reshape(-1))


def test_states_compare_by_their_bytes():
    data = _first_state("maze")
    assert parse_state(data) == parse_state(data)
    assert parse_state(data) != parse_state(
        next(random_states("maze", "easy", count=1, seed=9, keep_prob=1.0))
    )
