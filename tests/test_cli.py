"""The CLI: help, unknown commands, and user errors as one line with exit status 2."""

import json
import subprocess
import sys

import pytest

from proclab.cli import COMMANDS, main
from support import proclab as _run

HEAVY = ("torch", "matplotlib", "sklearn")
HELP_IMPORTS_TORCH = {
    "import", "train", "eval", "render", "record", "wm train", "wm sample", "wm frame-error",
    "wm loss-over-time", "wm evaluate", "analyze", "trex demos", "trex train", "trex grid", "trex plot",
    "trex train-policy", "trex demo-video", "trex evaluate",
}  # fmt: skip
"""Commands whose module still imports torch before parsing (a package re-export or the command's own
module): their ``--help`` pays for it. Every other command must print its help without a heavy library."""


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


def test_help_imports_no_heavy_library():
    """``proclab X --help`` of every light command, all in one fresh interpreter: afterwards none of
    torch, matplotlib or scikit-learn is loaded (each costs seconds before the help appears)."""
    light = [name for name in COMMANDS if name not in HELP_IMPORTS_TORCH]
    assert set(COMMANDS) >= HELP_IMPORTS_TORCH
    code = (
        "import contextlib, io, json, sys\n"
        "from proclab.cli import main\n"
        "for name in json.loads(sys.argv[1]):\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "        main([*name.split(), '--help'])\n"
        f"    print(json.dumps([name, [m for m in {HEAVY!r} if m in sys.modules]]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(light)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [name for name, _ in loaded] == light  # every help ran to its end
    first = next(((name, heavy) for name, heavy in loaded if heavy), None)
    assert first is None, f"proclab {first[0]} --help imports {', '.join(first[1])}"


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
