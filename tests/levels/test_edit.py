"""``proclab level edit`` and ``--levels-from``: an edited level plays as edited. A moved coin or cheese pays
where it was moved to, a removed one is gone; kinds a game does not have are refused with the valid ones."""

import json

import pytest

from proclab.cli import main
from proclab.envs import EnvConfig
from proclab.envs.actions import ACTION_NAMES
from proclab.envs.state import parse_state, positions
from proclab.envs.state.glossary import SPACE
from proclab.levels.file import read_level_states
from proclab.levels.level import generate_level
from proclab.models.scripted import ScriptedAgent
from proclab.rl.evaluate import evaluate
from proclab.run.runtime import make_runtime
from support import make_agent_checkpoint

STEPS = {"right": (1, 0), "up": (0, 1), "left": (-1, 0), "down": (0, -1)}


def _edit(*args: str) -> None:
    main(["level", "edit", *args])


def _always(game: str, path, button: str = "right", episodes: int = 1):
    """Episodes of an agent that always presses ``button``, on the levels of ``path``."""
    levels = read_level_states(path)
    config = EnvConfig(game=(game,), num_threads=1)
    rt = make_runtime("cpu", "fp32")
    return evaluate(
        ScriptedAgent(ACTION_NAMES.index(button)),
        config,
        "edited",
        episodes,
        rt,
        envs_per_game=1,
        levels=levels,
    )[game]


def test_a_moved_coin_pays_where_it_was_moved_to_and_a_removed_one_is_gone(tmp_path):
    """CoinRun level 3: the agent starts at x=1.5 on flat ground; its coin is far away (12.5, 4.5),
    behind crates that an agent pressing right never passes."""
    moved, removed = tmp_path / "moved.levels.json", tmp_path / "removed.levels.json"
    _edit("--game", "coinrun", "--level-seed", "3", "--move", "coin=4.5,1.5", "--out", str(moved))
    _edit("--levels", str(moved), "--remove", "coin", "--out", str(removed))
    state = parse_state(read_level_states(moved).states[0].data)
    assert positions(state, "coin").tolist() == [[4.5, 1.5]]
    assert len(positions(parse_state(read_level_states(removed).states[0].data), "coin")) == 0

    paid = _always("coinrun", moved)
    assert paid.returns == [10.0] and paid.completed == [True]
    # It pays when the agent (x = 1.5, half-width 0.5) first overlaps the coin's cell [4, 5): a few steps.
    assert 3 <= paid.lengths[0] <= 12
    gone = _always("coinrun", removed)
    assert gone.returns == [0.0] and gone.completed == [False] and gone.lengths[0] > 12


def test_a_moved_cheese_pays_where_it_was_moved_to(tmp_path):
    """Maze level 1: the cheese moved into a free cell next to the agent pays within a few steps of an
    agent pressing towards it, and nowhere else (that agent never reaches the original cheese)."""
    state = parse_state(generate_level("maze", "easy", 1).data)
    col, row = int(state.agent.x), int(state.agent.y)
    name, (dc, dr) = next(
        (name, d) for name, d in STEPS.items() if state.grid[row + d[1], col + d[0]] == SPACE
    )
    out = tmp_path / "maze.levels.json"
    _edit(
        "--game",
        "maze",
        "--level-seed",
        "1",
        "--move",
        f"cheese={col + dc + 0.5},{row + dr + 0.5}",
        "--out",
        str(out),
    )
    paid = _always("maze", out, name)
    assert paid.returns == [10.0] and paid.completed == [True] and paid.lengths[0] <= 10
    unmoved = tmp_path / "unmoved.levels.json"
    _edit(
        "--game",
        "maze",
        "--level-seed",
        "1",
        "--move-agent",
        f"{state.agent.x},{state.agent.y}",
        "--out",
        str(unmoved),
    )
    assert _always("maze", unmoved, name).returns == [0.0]


def test_eval_levels_from_plays_each_state_once(tmp_path, coin_file, capsys):
    """``proclab eval --levels-from``: levels whose coin surrounds the agent pay (10 a coin cell touched) and
    end in one step, whatever the policy."""
    ckpt = make_agent_checkpoint(tmp_path / "run", game="coinrun")
    main(["eval", "--agent", str(ckpt), "--levels-from", str(coin_file), "--json", "--device", "cpu"])
    table = json.loads(capsys.readouterr().out)
    (row,) = table["rows"]
    assert row["split"] == f"levels:{coin_file}" and row["episodes"] == 4
    assert row["return_mean"] >= 10.0 and row["length_mean"] == 1.0 and row["level_complete_rate"] == 1.0
    assert table["levels_from"] == str(coin_file)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--move", "cheese=1,1"], "unknown kind for coinrun 'cheese'. Valid: coin, crate,"),
        (["--remove", "sawz"], "Did you mean 'saw'?"),
        (["--move-agent", "99,1"], "position (99, 1) is outside the coinrun level"),
        (["--add", "saw"], "--add: expected KIND=X,Y"),
        ([], "no edit given"),
    ],
)
def test_a_bad_edit_is_one_line_naming_what_is_valid(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as exit_:
        _edit("--game", "coinrun", "--level-seed", "3", *args, "--out", str(tmp_path / "x.levels.json"))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.levels.json").exists()


def test_eval_refuses_levels_of_another_game(tmp_path, coin_file, capsys):
    ckpt = make_agent_checkpoint(tmp_path / "run", game="maze")
    with pytest.raises(SystemExit):
        main(["eval", "--agent", str(ckpt), "--levels-from", str(coin_file), "--device", "cpu"])
    assert "holds coinrun levels; the agent plays maze" in capsys.readouterr().err
