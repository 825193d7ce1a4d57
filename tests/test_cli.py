"""The CLI: help, unknown commands, and user errors as one line with exit status 2."""

import pytest

from proclab.cli import COMMANDS, main
from support import proclab as _run


def test_help_lists_every_command():
    proc = _run("--help")
    assert proc.returncode == 0
    for name in COMMANDS:
        assert name in proc.stdout


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help(name):
    with pytest.raises(SystemExit) as exc:
        main([*name.split(), "--help"])
    assert exc.value.code == 0


def test_unknown_command_suggests():
    proc = _run("gmaes")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "proclab: error: unknown command 'gmaes'. Did you mean 'games'? Valid: "
        + ", ".join(sorted({c.split()[0] for c in COMMANDS}))
        + "."
    )


def test_user_error_is_one_line_exit_2(tmp_path):
    proc = _run("quickstart", "--game", "coinrn", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "Did you mean 'coinrun'" in proc.stderr


def test_a_full_disk_met_by_a_library_is_one_line(monkeypatch, capsys):
    """An ENOSPC that reaches the command line from a writer proclab does not wrap is one line, exit 2."""
    import errno

    import proclab.envs.cli

    def full(argv, prog):
        raise OSError(errno.ENOSPC, "No space left on device", "/data/events.out")

    monkeypatch.setattr(proclab.envs.cli, "main", full)
    with pytest.raises(SystemExit) as exit_:
        main(["games"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err == (
        "proclab: error: No space left on device writing '/data/events.out'; free some space and run again\n"
    )
