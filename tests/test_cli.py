"""The CLI: help, unknown commands, user errors as one line with exit status 2, renamed commands and
flags answered with their new spelling, and the conventions every command follows (docs/architecture.md,
"Conventions of the command line")."""

import contextlib
import dataclasses
import io
import json
import subprocess
import sys
import typing

import pytest
import tyro

from proclab.cli import COMMANDS, POSITIONAL, RENAMED, RENAMED_FLAGS, main
from proclab.interpret.command import ANALYSES
from proclab.run.runtime_flags import RuntimeFlags
from support import proclab as _run

HEAVY = ("torch", "matplotlib", "sklearn")
HELP_IMPORTS_TORCH = {
    "import", "train", "record", "wm train", "wm sample", "wm loss-over-time",
    "wm evaluate", "analyze", "trex demos", "trex train", "trex grid", "trex plot", "trex demo-video",
    "trex evaluate",
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

    import proclab.envs.command

    def full(argv, prog):
        raise OSError(errno.ENOSPC, "No space left on device", "/data/events.out")

    monkeypatch.setattr(proclab.envs.command, "games_command", full)
    with pytest.raises(SystemExit) as exit_:
        main(["games"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err == (
        "proclab: error: No space left on device writing '/data/events.out'; free some space and run again\n"
    )


def test_removed_commands_answer_with_their_new_name(capsys):
    for old, (new, note) in RENAMED.items():
        assert old not in COMMANDS and new.split(" --")[0] in COMMANDS, old
        with pytest.raises(SystemExit) as exit_:
            main([*old.split(), "--help"])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and err == f"proclab: error: '{old}' is now '{new}' ({note})\n"


def test_renamed_flags_answer_with_their_new_spelling(capsys):
    for name, renamed in RENAMED_FLAGS.items():
        assert name in COMMANDS, name
        for old, new in renamed.items():
            argv = ["runs/x"] if old == POSITIONAL else [old, "x"]
            with pytest.raises(SystemExit) as exit_:
                main([*name.split(), *argv])
            err = capsys.readouterr().err
            assert exit_.value.code == 2 and err.count("\n") == 1, (name, old, err)
            flag = new.split()[0]
            assert f"is now '{name} {flag}" in err, (name, old, err)


# -- the conventions of every command, read from the arguments class it parses ------------------------
NO_RUNTIME = {
    "import": "converts a checkpoint file into a run directory; computes nothing",
    "plot": "draws the curves of metrics.csv files",
    "level show": "parses and draws a level state (procgen only)",
    "level edit": "edits a level state (procgen only)",
    "level export": "copies game states out of a store",
    "data info": "reads a store's index and chunks",
    "data export": "copies a store's arrays",
    "panel export": "copies the analysis folder (a hook's activations: the analyses' reader, CPU, fp32)",
    "panel serve": "serves files",
    "games": "lists names",
}
"""Commands that compute nothing with torch, so take no runtime flags; every other command inherits
:class:`~proclab.run.runtime.RuntimeConfig`'s fields with their defaults."""
ACTS_ON_A_WORLD_MODEL = {"wm sample", "wm loss-over-time", "wm evaluate"}


ARG_CONFIG = type(tyro.conf.arg())


@dataclasses.dataclass(frozen=True)
class Field:
    """One command-line argument of an arguments class, as tyro builds it."""

    path: str
    """Dotted field path (``train.demos``)."""
    flag: str
    """Its own name on the command line (``tyro.conf.arg(name=...)`` or the field's)."""
    metavar: str | None
    positional: bool
    is_struct: bool
    """A nested dataclass (its fields are arguments of their own)."""
    type: object


def arguments(cls: type, prefix: str = "") -> list[Field]:
    """Every argument of ``cls`` a user can give (suppressed fields left out), nested ones included."""
    hints = typing.get_type_hints(cls, include_extras=True)
    found = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        meta = getattr(tp, "__metadata__", ())
        base = typing.get_args(tp)[0] if meta else tp
        if any(m is tyro.conf.Suppress for m in meta):
            continue
        configs = [m for m in meta if isinstance(m, ARG_CONFIG)]
        name = next((c.name for c in configs if c.name), f.name)
        metavar = next((c.metavar for c in configs if c.metavar), None)
        struct = dataclasses.is_dataclass(base)
        found.append(
            Field(prefix + f.name, name, metavar, any(m is tyro.conf.Positional for m in meta), struct, base)
        )
        if struct:
            found += arguments(base, f"{prefix}{f.name}.")
    return found


class _Parsed(Exception):
    """Raised in place of parsing: the arguments class (and default instance) a command gave tyro."""


def parsed(argv: list[str], monkeypatch) -> tuple[type, object]:
    def capture(cls, *, default=None, **_):
        raise _Parsed(cls, default)

    with monkeypatch.context() as m:
        m.setattr(tyro, "cli", capture)
        with pytest.raises(_Parsed) as got:
            main([*argv, "--help"])
    return got.value.args


def help_text(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*argv, "--help"])
    return out.getvalue()


def convention_breaches(name: str, argv: list[str], monkeypatch) -> list[str]:
    """What in the command ``argv`` (named ``name``) breaks a convention of the command line."""
    cls, default = parsed(argv, monkeypatch)
    args = arguments(cls)
    bad = [f"a field named {a.path}" for a in args if a.flag in ("checkpoint", "checkpoints")]
    for a in args:
        if a.is_struct:
            continue
        several = typing.get_origin(a.type) is tuple
        if a.flag in ("agent", "agents") or (a.metavar or "").startswith("AGENT"):
            want = ("agents", "AGENT [AGENT ...]") if several else ("agent", "AGENT")
            if (a.flag, a.metavar, a.positional) != (*want, False):
                bad.append(
                    f"{a.path} is {a.flag} {a.metavar} (positional: {a.positional}), not --{' '.join(want)}"
                )
        if a.flag == "data" and (a.metavar, a.positional) != ("DATA", False):
            bad.append(f"the store {a.path} is not --data DATA")
        if a.positional and a.metavar in ("DATA", "AGENT"):
            bad.append(f"{a.path} is a positional {a.metavar}")
        if a.flag == "wm" and a.metavar != "WM":
            bad.append(f"the world model {a.path} is not WM")
    if name in ACTS_ON_A_WORLD_MODEL and [a.metavar for a in args if a.positional] != ["WM"]:
        bad.append("its world model is not the positional WM")
    if name not in NO_RUNTIME:
        runtime = {f.name: getattr(RuntimeFlags(), f.name) for f in dataclasses.fields(RuntimeFlags)}
        if not issubclass(cls, RuntimeFlags):
            bad.append("no runtime flags")
        else:  # the defaults a user gets: those of the instance the command starts from, else the class's
            fields = {f.name: f for f in dataclasses.fields(cls)}
            given = {k: fields[k].default if default is None else getattr(default, k) for k in runtime}
            bad += [f"--{k.replace('_', '-')} defaults to {v!r}" for k, v in given.items() if v != runtime[k]]
    text = help_text(argv)
    for a in args:
        if a.flag in ("agent", "agents") and not a.is_struct and f"--{a.flag} {a.metavar}" not in text:
            bad.append(f"--help does not show --{a.flag} {a.metavar}")
    return bad


CASES = [
    *(pytest.param(name, name.split(), id=name) for name in sorted(COMMANDS) if name != "analyze"),
    pytest.param("train", ["train", "--reward-model", "REWARD_MODEL"], id="train --reward-model"),
    *(pytest.param(f"analyze {name}", ["analyze", name], id=f"analyze {name}") for name in ANALYSES),
]


@pytest.mark.parametrize(("name", "argv"), CASES)
def test_every_command_follows_the_conventions(name, argv, monkeypatch):
    """The agent is --agent AGENT (several: --agents AGENT [AGENT ...]), a store read is --data DATA, the wm
    commands take the world model as the positional WM, every command that computes with torch has the
    runtime flags with RuntimeConfig's defaults, and no argument is called checkpoint(s)."""
    assert convention_breaches(name, argv, monkeypatch) == []
