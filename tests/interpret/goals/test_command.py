"""``proclab analyze decision-square`` end to end on a tiny maze agent (outputs written, batches kept and
resumed), its --help, and bad input refused in one line."""

import json

import numpy as np
import pytest

from proclab.cli import main


def cli(out, agent, *extra):
    main(
        [
            "analyze",
            "decision-square",
            "--out",
            str(out),
            "--agent",
            str(agent),
            "--torch-threads",
            "1",
            *extra,
        ]
    )


def test_the_command_writes_its_outputs_and_resumes_from_kept_batches(tmp_path, maze_agent_dir, capsys):
    args = ("--levels", "5015:1", "--episodes", "4", "--batch", "2", "--keep-batches", str(tmp_path / "kept"))
    cli(tmp_path / "A", maze_agent_dir, *args)
    out = tmp_path / "A" / "decision-square"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes_played"] == 4 and summary["mazes"] == 1  # one level, counted once
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == ["batch_00000.json", "batch_00001.json"]
    assert (out / "rates.png").stat().st_size > 0 and set(np.load(out / "mazes.npz")) >= {
        "level",
        "corner_step",
    }
    assert "cheese" in summary["regressions"] and "skipped" in summary["regressions"]["cheese"]
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"outputs in {out}"
    # a second run reads the kept batches: the same episodes, nothing played again
    kept = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "kept").iterdir()}
    cli(tmp_path / "B", maze_agent_dir, *args)
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "kept").iterdir()} == kept
    again = json.loads((tmp_path / "B" / "decision-square" / "summary.json").read_text())
    assert again["bins"] == summary["bins"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--bins", "0,x"), "--bins '0,x'"),
        (("--bins", "3,1"), "--bins must be at least two increasing"),
        (("--penalty", "l2"), "--penalty must be one of"),
        (("--episodes", "0"), "--episodes must be >= 1"),
    ],
)
def test_bad_input_is_one_line(tmp_path, maze_agent_dir, capsys, extra, message):
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "analyze",
                "decision-square",
                "--out",
                str(tmp_path / "X"),
                "--agent",
                str(maze_agent_dir),
                *extra,
            ]
        )
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and message in err and "\n" not in err, err
    assert not (tmp_path / "X" / "decision-square").exists()


def test_help_names_every_option(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["analyze", "decision-square", "--help"])
    text = capsys.readouterr().out
    assert exit_.value.code == 0 and "--keep-batches" in text and "--horizon" in text
