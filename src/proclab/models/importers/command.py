"""``proclab import``: an agent trained by another code base, as an ordinary proclab run directory.

The conversion and the environment it plays (the command line, then the file, then proclab's table of
published checkpoints, otherwise assumed and said so) are :mod:`.setting`'s, shared with ``load``; the run
directory is :mod:`.run_dir`'s; this module only parses, calls and writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from proclab.io.run_dirs import CONFIG
from proclab.models.importers import FORMATS
from proclab.models.importers.run_dir import import_run
from proclab.models.importers.setting import Asked


@dataclass(frozen=True)
class ImportArgs:
    """Import an agent trained by another code base (train-procgen-pytorch, CleanRL, PufferLib,
    torchbeast / modern-srwm, Cleanba) as a proclab run directory that every command takes."""

    source: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="SOURCE")]
    """The checkpoint file, or a directory holding it (a train-procgen log directory: its latest model_<steps>.pth)."""
    game: str | None = None
    """The Procgen game the agent plays. Default: what the file (or proclab's table of published agents) says."""
    mode: str | None = None
    """Distribution mode it was trained in. Default: the file's, the published one, else easy."""
    split: str | None = None
    """Its training levels (named split or START:NUM); eval's held-out splits must avoid them. Default: the
    file's, the published one, else all (every level may have been seen)."""
    backgrounds: bool | None = None
    """Whether it was trained with Procgen's backgrounds (interpreting-rl-behavior's agent was not). Default:
    the published setting, else true (Procgen's default)."""
    format: str = "auto"
    """Checkpoint format: auto (recognised from the tensor names), train-procgen, cleanrl, torchbeast or cleanba."""
    out: Path | None = None
    """Run directory to write. Default: runs/import/GAME/<file name>-<first 8 hex of its SHA-256>."""
    force: bool = False
    """Replace an existing run directory at --out."""
    allow_mismatch: bool = False
    """Import for --game / --mode even where the file (or the table of published agents) says the agent
    was trained in another game or mode."""


def import_agent(args: ImportArgs) -> tuple[Path, dict]:
    """The import ``args`` ask for (:func:`~.run_dir.import_run`). Returns the run directory and its record."""
    asked = Asked(args.game, args.mode, args.split, args.backgrounds, args.allow_mismatch)
    return import_run(args.source, asked, format=args.format, out=args.out, force=args.force)


def import_command(argv: list[str], prog: str = "proclab import") -> None:
    args = tyro.cli(ImportArgs, args=argv, prog=prog)
    out, record = import_agent(args)
    assumed = [k for k, v in record["setting_from"].items() if v == "assumed"]
    config = json.loads((out / CONFIG).read_text())
    env, agent = config["env"], config["agent"]
    print(
        f"format: {record['format']} ({FORMATS[record['format']].label}; chosen by {record['format_chosen_by']}), "
        f"{record['variant']}"
        + (f", published as {record['published_as']}" if record["published_as"] else "")
    )
    core = agent["core"] if agent["core"] == "none" else f"{agent['core']} {_core_size(agent)}"
    print(
        f"agent: {agent['torso']} torso {tuple(agent['widths'])}, fc {agent['fc']}, core {core}, "
        f"{agent['num_actions']} actions" + (", reads the previous reward" if agent["prev_reward"] else "")
    )
    print(
        f"plays: {env['game'][0]} {env['mode']}, training levels {env['split']}, "
        f"backgrounds {'on' if env['use_backgrounds'] else 'off'}"
        + (f"; assumed: {', '.join(assumed)} (override with --{' --'.join(assumed)})" if assumed else "")
    )
    step = f" at step {record['step']:,} ({record['step_from']})" if record["step"] is not None else ""
    print(f"imported{step} -> {out} (check it: proclab eval --agent {out})")


def _core_size(agent: dict) -> str:
    if agent["core"] in ("gru", "lstm"):
        return f"{agent['rnn_size']}" + (
            f" x {agent['rnn_layers']} layers" if agent["rnn_layers"] > 1 else ""
        )
    return f"{agent['num_layers']} layers, width {agent['hidden']}, {agent['num_heads']} heads"
