"""Level-state files: what is written reads back byte for byte; anything else is refused in one line."""

import base64
import dataclasses
import hashlib
import json
import re
import warnings
import zlib

import pytest

from proclab.envs.state import parse_state, serialize_state
from proclab.errors import ProclabError
from proclab.levels.file import LevelState, level_states, read_level_states, write_level_states
from proclab.levels.level import generate_level


def test_states_read_back_byte_for_byte_with_their_seeds_and_notes(tmp_path, coin_on_agent):
    path = write_level_states(tmp_path / "a.levels.json", coin_on_agent)
    back = read_level_states(path, game="coinrun", mode="easy")
    assert back == coin_on_agent
    assert [s.level_seed for s in back.states] == [3, 5, 8, 13]
    doc = json.loads(path.read_text())
    assert (
        doc["format"] == "proclab-level-states" and doc["version"] == 1 and doc["procgen_version"] == "0.10.7"
    )
    with pytest.raises(ProclabError, match="exists; choose another path or pass --overwrite"):
        write_level_states(path, coin_on_agent)
    write_level_states(path, coin_on_agent, overwrite=True)


def _rewrite(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(format="other"), "is not a proclab level-state file"),
        (lambda d: d.update(version=2), "has format version 2"),
        (
            lambda d: d.update(procgen_version="0.10.4"),
            "holds states of procgen '0.10.4'; the installed procgen is 0.10.7",
        ),
        (lambda d: d.update(game="maze"), "state 0 is a coinrun state of mode easy, not maze easy"),
        (lambda d: d.update(mode="hard"), "state 0 is a coinrun state of mode easy, not coinrun hard"),
        (lambda d: d.update(mode="silly"), "unknown distribution mode 'silly'"),
        (lambda d: d["states"][1].update(data=d["states"][1]["data"][:40]), "state 1: its data is corrupt"),
        (lambda d: d["states"][2].update(encoding="raw"), 'state 2: expected an object with "encoding"'),
        (lambda d: d.update(states=[]), "holds no states"),
    ],
)
def test_a_damaged_or_foreign_file_is_refused_in_one_line(tmp_path, coin_on_agent, change, message):
    path = write_level_states(tmp_path / "a.levels.json", coin_on_agent)
    _rewrite(path, change)
    with pytest.raises(ProclabError) as err:
        read_level_states(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_bytes_that_are_no_state_of_the_game_are_refused(tmp_path, coin_on_agent):
    maze = generate_level("maze", "easy", 1)
    with pytest.raises(ProclabError, match="state 0 is a maze state of mode easy, not coinrun easy"):
        level_states("coinrun", "easy", [maze])
    with pytest.raises(ProclabError, match="state 0: game state"):
        level_states("coinrun", "easy", [LevelState(b"\x00" * 64, 0)])
    with pytest.raises(ProclabError, match="holds maze levels; this command plays coinrun"):
        read_level_states(
            write_level_states(tmp_path / "m.levels.json", level_states("maze", "easy", [maze])),
            game="coinrun",
        )


def _inverted(data: bytes, start: int, count: int = 64) -> bytes:
    """``data`` with ``count`` bytes from ``start`` inverted (each byte XOR 0xFF)."""
    return data[:start] + bytes(b ^ 0xFF for b in data[start : start + count]) + data[start + count :]


def _replace_data(doc: dict, i: int, data: bytes) -> None:
    """State ``i`` of a file's JSON given the bytes ``data``, recompressed as proclab writes them."""
    doc["states"][i]["data"] = base64.b64encode(zlib.compress(data, 6)).decode("ascii")


def test_altered_state_bytes_recompressed_are_refused_in_one_line(tmp_path, coin_on_agent):
    """The issue's case: 64 bytes of a state inverted and recompressed. Inverting the bytes of an entity's
    float fields still parses as a coinrun state, so only the stored SHA-256 finds the edit."""
    data = coin_on_agent.states[1].data
    tampered = _inverted(data, 1024)
    # a well-formed coinrun state of known kinds: parsing alone accepts it, as it did before digests
    assert level_states("coinrun", "easy", [LevelState(tampered, 5)]).states[0].data == tampered
    path = write_level_states(tmp_path / "a.levels.json", coin_on_agent)
    _rewrite(path, lambda d: _replace_data(d, 1, tampered))
    with pytest.raises(ProclabError) as err:
        read_level_states(path)
    assert "state 1: its bytes do not match their sha256" in str(err.value) and "\n" not in str(err.value)


def test_a_cell_or_entity_kind_the_game_does_not_have_is_refused(tmp_path, coin_on_agent):
    """Bytes with a matching SHA-256 (a state edited by a program that rewrote the digest too) are still
    refused when they hold a kind coinrun does not have: procgen would draw and play it as something."""
    state = parse_state(coin_on_agent.states[0].data)
    grid = state.grid.copy()
    grid[0, 0] = 777
    bad_cell = serialize_state(dataclasses.replace(state, grid=grid))
    entities = list(state.entities)
    entities[-1] = dataclasses.replace(entities[-1], type=333)
    bad_entity = serialize_state(dataclasses.replace(state, entities=entities))
    for data, message in ((bad_cell, "grid cells of value [777]"), (bad_entity, "entities of type [333]")):
        path = write_level_states(tmp_path / "k.levels.json", coin_on_agent, overwrite=True)

        def change(doc, data=data):
            _replace_data(doc, 2, data)
            doc["states"][2]["sha256"] = hashlib.sha256(data).hexdigest()

        _rewrite(path, change)
        with pytest.raises(ProclabError) as err:
            read_level_states(path)
        assert f"state 2: holds {message}, which coinrun does not have" in str(err.value)
        assert "\n" not in str(err.value)
        with pytest.raises(ProclabError, match=re.escape(message)):
            level_states("coinrun", "easy", [LevelState(data, 0)])


def test_untouched_files_load_without_a_warning_and_keep_each_states_digest(tmp_path, coin_on_agent):
    path = write_level_states(tmp_path / "a.levels.json", coin_on_agent)
    doc = json.loads(path.read_text())
    assert [e["sha256"] for e in doc["states"]] == [
        hashlib.sha256(s.data).hexdigest() for s in coin_on_agent.states
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_level_states(path) == coin_on_agent


def test_a_file_written_before_digests_still_loads_with_one_warning_line(tmp_path, coin_on_agent):
    """Written the old way (the same JSON without "sha256"), by hand here: it reads back whole, and says
    once, in one line, that its bytes could not be checked."""
    old = {
        "format": "proclab-level-states",
        "version": 1,
        "game": "coinrun",
        "mode": "easy",
        "procgen_version": coin_on_agent.procgen_version,
        "states": [
            {
                "level_seed": s.level_seed,
                "note": s.note,
                "encoding": "zlib+base64",
                "data": base64.b64encode(zlib.compress(s.data, 6)).decode("ascii"),
            }
            for s in coin_on_agent.states
        ],
    }
    path = tmp_path / "old.levels.json"
    path.write_text(json.dumps(old, indent=1))
    with pytest.warns(UserWarning) as caught:
        back = read_level_states(path, game="coinrun", mode="easy")
    assert back == coin_on_agent
    assert len(caught) == 1 and "\n" not in str(caught[0].message)
    assert "cannot be checked for edits" in str(caught[0].message)
    # the rule for old files is the kind check alone: an altered old file with an unknown cell is refused
    grid_state = parse_state(coin_on_agent.states[0].data)
    grid = grid_state.grid.copy()
    grid[0, 0] = 777
    old["states"][0]["data"] = base64.b64encode(
        zlib.compress(serialize_state(dataclasses.replace(grid_state, grid=grid)), 6)
    ).decode("ascii")
    path.write_text(json.dumps(old))
    with pytest.warns(UserWarning), pytest.raises(ProclabError, match="grid cells of value"):
        read_level_states(path)
