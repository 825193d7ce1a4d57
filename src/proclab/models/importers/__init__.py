"""Checkpoints trained by other code bases, turned into proclab agents (``proclab import``).

One module per checkpoint family; each recognises its files from their tensor names and
builds an :class:`~proclab.models.AgentConfig` from their shapes:

=================  ==========================================================================
``train-procgen``  train-procgen-pytorch ``model_<steps>.pth`` (interpreting-rl-behavior,
                   goal-misgeneralization, procgen-tools): IMPALA or Nature CNN, optional GRU
``cleanrl``        CleanRL ``ppo_procgen`` / PufferLib ``ProcgenResnet`` state dicts (+ LSTM)
``torchbeast``     torchbeast / modern-srwm ``model.tar``: feed-forward, LSTM, Delta Net, SRWM,
                   Fake SR, SR-Delta, no-carry SRWM
``cleanba``        CleanRL JAX / Cleanba Flax msgpack files (read without JAX)
=================  ==========================================================================

:func:`read_agent` is the whole conversion, file to agent; :mod:`.setting` adds the environment
the agent plays (for ``proclab import`` and for ``load``), and :mod:`.command` writes the run
directory every other proclab command reads.
"""

from __future__ import annotations

from pathlib import Path

from proclab.errors import ProclabError, unknown_choice
from proclab.models.importers import cleanba, cleanrl, torchbeast, train_procgen
from proclab.models.importers.base import Format, ImportedAgent, SourceFacts, state_dict_of
from proclab.models.importers.source import SourceFile, read_source

FORMATS: dict[str, Format] = {
    f.name: f for f in (train_procgen.FORMAT, cleanrl.FORMAT, torchbeast.FORMAT, cleanba.FORMAT)
}

__all__ = ["FORMATS", "Format", "ImportedAgent", "SourceFacts", "SourceFile", "detect_format", "read_agent"]


def detect_format(source: SourceFile) -> Format:
    """The one format that recognises ``source``; a one-line error naming what was seen otherwise."""
    found = [f for f in FORMATS.values() if f.detect(source)]
    if len(found) == 1:
        return found[0]
    if found:
        raise ProclabError(
            f"checkpoint {str(source.path)!r} matches several formats ({', '.join(f.name for f in found)}); "
            "pick one with --format (load: format=)"
        )
    raise ProclabError(f"checkpoint {str(source.path)!r} is in no format proclab knows: {_describe(source)}")


def _describe(source: SourceFile) -> str:
    tensors = state_dict_of(source.payload)
    if tensors:
        shown = ", ".join(list(tensors)[:4])
        return f"its tensors start {shown} (formats: {', '.join(FORMATS)})"
    if isinstance(source.payload, dict):
        return f"a {source.container} dict with keys {', '.join(map(str, list(source.payload)[:6]))}"
    return f"a {source.container} {type(source.payload).__name__}"


def read_agent(path: str | Path, format: str = "auto") -> tuple[SourceFile, Format, ImportedAgent]:
    """Read ``path`` (a file, or a directory holding one) as a proclab agent."""
    if format != "auto" and format not in FORMATS:
        raise unknown_choice("checkpoint format", format, ["auto", *FORMATS])
    source = read_source(path)
    fmt = detect_format(source) if format == "auto" else FORMATS[format]
    if format != "auto" and not fmt.detect(source):
        raise ProclabError(
            f"checkpoint {str(source.path)!r} is not a {fmt.name} checkpoint ({fmt.label}): {_describe(source)}"
        )
    return source, fmt, fmt.convert(source)
