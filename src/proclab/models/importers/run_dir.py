"""An agent converted from another code base, written as an ordinary proclab run directory (``proclab import``).

The run directory holds ``config.json`` (the import's provenance, the inferred agent config and
the environment it plays) and one checkpoint, ``checkpoints/step_<N>/``, whose ``meta.json``
carries the same facts, so ``eval``, ``render``, ``record``, ``analyze``, ``wm train``, ``trex
demos``, ``panel`` and ``quickstart`` take it like a run proclab trained. The directory is built under a
temporary name and renamed into place (``io.files.replacing``: a crash or a full disk leaves no half-written
run); an existing one is replaced only when asked.
"""

from __future__ import annotations

import time
from pathlib import Path

from proclab.errors import ProclabError
from proclab.io.checkpoint import save_checkpoint
from proclab.io.configs import to_dict
from proclab.io.files import replacing, write_json
from proclab.io.run_dirs import CONFIG
from proclab.models.importers.published import PUBLISHED
from proclab.models.importers.setting import Asked, Conversion, convert
from proclab.models.importers.source import SourceFile


def reward_normalisation(source: SourceFile) -> dict:
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


def import_run(
    source: Path, asked: Asked, *, format: str = "auto", out: Path | None = None, force: bool = False
) -> tuple[Path, dict]:
    """The whole import of the checkpoint ``source`` (a file, or a directory holding it) in ``format`` (auto:
    recognised from the tensor names), for the environment ``asked``: read, convert, check, write ``out``
    (default: :func:`default_out`; an existing run directory is replaced only with ``force``). Returns the run
    directory and its record."""
    conversion = convert(source, format, asked)
    chose = "--format" if format != "auto" else "tensor names"
    record = provenance(conversion, chose)
    out = out or default_out(conversion.source, conversion.setting.env.game[0])
    normalisation = reward_normalisation(conversion.source)
    write_run(out, conversion, {**record, "reward_normalisation": normalisation}, force)
    return out, record
