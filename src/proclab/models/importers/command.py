"""``proclab import``: an agent trained by another code base, as an ordinary proclab run directory.

The run directory holds ``config.json`` (the import's provenance, the inferred agent config and
the environment it plays) and one checkpoint, ``checkpoints/step_<N>/``, whose ``meta.json``
carries the same facts, so ``eval``, ``render``, ``record``, ``analyze``, ``wm train``, ``trex
demos``, ``panel`` and ``quickstart`` take it like a run proclab trained.

The conversion and the environment it plays (the command line, then the file, then proclab's
table of published checkpoints, otherwise assumed and said so) are :mod:`.setting`'s, shared with
``load``; this module only parses, calls and writes. The directory is built under a temporary
name and renamed into place (``io.files.replacing``: a crash or a full disk leaves no half-written
run); an existing one is replaced only with ``--force``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from proclab.errors import ProclabError
from proclab.io.checkpoint import save_checkpoint
from proclab.io.configs import to_dict
from proclab.io.files import replacing, write_json
from proclab.io.run_dirs import CONFIG
from proclab.models.importers import FORMATS
from proclab.models.importers.published import PUBLISHED
from proclab.models.importers.setting import Asked, Conversion, convert
from proclab.models.importers.source import SourceFile


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


def _reward_normalisation(source: SourceFile) -> dict:
    flags = source.payload.get("flags") if isinstance(source.payload, dict) else None
    if isinstance(flags, dict) and flags.get("reward_clipping") == "abs_one":
        return {"scale": 1.0, "clip": 1.0, "source": "torchbeast reward_clipping abs_one"}
    return {
        "scale": 1.0,
        "clip": None,
        "source": "imported: the file holds no reward statistics; reward_norm = reward",
    }


def provenance(conversion: Conversion, chose: str) -> dict:
    """The ``import`` record kept in ``config.json`` and in the checkpoint's ``meta.json``."""
    source, imported, setting = conversion.source, conversion.imported, conversion.setting
    table = PUBLISHED.get(source.sha256)
    return {
        "source": str(source.path.resolve()),
        "sha256": source.sha256,
        "bytes": source.size,
        "format": conversion.format.name,
        "format_chosen_by": chose,
        "variant": imported.variant,
        "published_as": table.name if table else None,
        "step": imported.facts.step,
        "step_from": imported.facts.step_from,
        "setting_from": setting.said_by,
        "conventions": imported.conventions,
        "ignored_tensors": list(imported.ignored),
        "imported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def default_out(source: SourceFile, game: str) -> Path:
    stem = source.path.name.split(".")[0] or "agent"
    return Path("runs") / "import" / game / f"{stem}-{source.sha256[:8]}"


def write_run(out: Path, conversion: Conversion, record: dict, force: bool) -> Path:
    """Build the run directory under a temporary name, then rename it to ``out``."""
    if out.exists() and not force:
        raise ProclabError(f"{str(out)!r} already exists; pass --force to replace it, or choose --out")
    if out.exists() and not (out / CONFIG).is_file():
        raise ProclabError(f"{str(out)!r} exists and is not a run directory; proclab will not replace it")
    step = conversion.imported.facts.step or 0
    env = conversion.setting.env
    meta = {
        "kind": "agent",
        "algo": "impala" if record["format"] == "torchbeast" else "ppo",
        "step": step,
        "games": list(env.game),
        "agent": to_dict(conversion.imported.config),
        "env": to_dict(env),
        "reward_normalisation": record.pop("reward_normalisation"),
        "import": record,
    }
    with replacing(out, "imported run directory") as tmp:
        tmp.mkdir()
        save_checkpoint(tmp / "checkpoints" / f"step_{step:012d}", conversion.agent().state_dict(), meta)
        (tmp / "videos").mkdir()
        write_json(tmp / CONFIG, {"import": record, "agent": meta["agent"], "env": meta["env"]}, "run config")
    return out


def import_agent(args: ImportArgs) -> tuple[Path, dict]:
    """The whole import: read, convert, check, write. Returns the run directory and its record."""
    asked = Asked(args.game, args.mode, args.split, args.backgrounds, args.allow_mismatch)
    conversion = convert(args.source, args.format, asked)
    chose = "--format" if args.format != "auto" else "tensor names"
    record = provenance(conversion, chose)
    out = args.out or default_out(conversion.source, conversion.setting.env.game[0])
    normalisation = _reward_normalisation(conversion.source)
    write_run(out, conversion, {**record, "reward_normalisation": normalisation}, args.force)
    return out, record


def main(argv: list[str], prog: str = "proclab import") -> None:
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
