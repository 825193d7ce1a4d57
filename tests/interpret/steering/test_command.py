"""analyze steer on a tiny maze agent: the cheese vector is built from with/without pairs, coefficient 0
is the plain agent (no change, exactly), and retargeting reports both arms against the plain agent."""

import json

import pytest
import torch

from proclab.cli import main
from proclab.envs import EnvConfig
from proclab.models import AgentConfig
from support import TINY_AGENT, agent_checkpoint


@pytest.fixture(scope="module")
def maze_agent(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("maze")
    return agent_checkpoint(
        tmp / "run", AgentConfig(core="none", **TINY_AGENT), EnvConfig(game=("maze",), num_envs=2)
    )


def test_steer_builds_the_vector_and_pairs_every_coefficient(tmp_path, maze_agent, capsys):
    out = tmp_path / "S"
    main(
        [
            "analyze",
            "steer",
            "--out",
            str(out),
            "--agent",
            str(maze_agent),
            "--levels",
            "2",
            "--vector-levels",
            "0:3",
            "--coefficients",
            "0,3",
            "--channels",
            "0",
            "1",
            "--rows",
            "4",
            "--per-level",
            "--magnitude",
            "3",
            "--bootstrap",
            "100",
            "--torch-threads",
            "1",
        ]
    )
    assert "retargeting: reached the target" in capsys.readouterr().out
    summary = json.loads((out / "steer" / "summary.json").read_text())
    assert summary["entity"] == "cheese" and summary["vector"]["pairs"] == 3
    vector = torch.load(out / "steer" / "vector.pt", weights_only=True)
    assert tuple(vector.shape) == (8, 16, 16) and summary["vector"]["norm"] > 0
    zero = summary["coefficients"]["0"]
    assert all(zero[k]["change"] == 0 for k in ("return", "level_complete", "length"))
    assert set(summary["coefficients"]) == {"0", "3"}
    for c, row in summary["coefficients"].items():
        cheese = row["reach"]["cheese"]  # maze's only kinds: walls and the cheese
        assert cheese["levels"] == 2 and cheese["intervened"] >= row["level_complete"]["intervened"]
        assert c != "0" or cheese["change"] == 0
    per_level = summary["per_level"]
    assert per_level["levels_with_entity"] == 2
    assert all(
        per_level["coefficients"]["0"][k]["change"] == 0 for k in ("return", "level_complete", "length")
    )
    r = summary["retarget"]
    assert r["channels"]["tracking"] == [0, 1] and len(set(r["channels"]["random"]) & {0, 1}) == 0
    assert {"tracking_vs_plain", "random_vs_plain", "tracking_vs_random"} <= set(r)


def test_coefficients_must_include_zero(tmp_path, maze_agent, capsys):
    with pytest.raises(SystemExit) as e:
        main(
            [
                "analyze",
                "steer",
                "--out",
                str(tmp_path / "T"),
                "--agent",
                str(maze_agent),
                "--coefficients",
                "1,2",
            ]
        )
    assert e.value.code == 2 and "must include 0" in capsys.readouterr().err


def test_steer_levels_from_plays_the_files_states_as_the_held_out_levels(tmp_path, maze_agent):
    """``--levels-from``: the file's states are the held-out levels (one each per coefficient, --levels
    unused), the vector still comes from --vector-levels, and the summary names the file."""
    from proclab.levels.file import level_states, write_level_states
    from proclab.levels.level import generate_level

    file = write_level_states(
        tmp_path / "mazes.json",
        level_states("maze", "easy", [generate_level("maze", "easy", s) for s in (3, 8, 11)]),
    )
    out = tmp_path / "S"
    main(
        ["analyze", "steer", "--out", str(out), "--agent", str(maze_agent), "--levels", "50",
         "--levels-from", str(file), "--vector-levels", "0:2", "--coefficients", "0,1", "--rows", "4",
         "--bootstrap", "50", "--torch-threads", "1"]
    )  # fmt: skip
    summary = json.loads((out / "steer" / "summary.json").read_text())
    assert summary["levels_from"] == str(file) and summary["vector"]["pairs"] == 2
    assert summary["levels"] == 3 and set(summary["coefficients"]) == {"0", "1"}
