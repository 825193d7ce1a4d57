"""Level-state files: what is written reads back byte for byte; anything else is refused in one line."""

import json

import pytest

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
