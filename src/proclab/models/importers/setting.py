"""A foreign checkpoint made ready to play: converted, checked, and given the environment it plays.

``proclab import`` (which writes the result as a run directory) and ``load`` (which keeps it in
memory) both go through :func:`convert`, so the two agree on every fact and every refusal. What
the environment was is taken, in order, from the caller (the command line, or ``load``'s
arguments), from the file (torchbeast flags, Cleanba's ``env_id``), from proclab's table of
published checkpoints (by SHA-256), and otherwise assumed, and the :class:`Setting` records which.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from proclab.envs import NUM_ACTIONS, EnvConfig, check_game, parse_split
from proclab.errors import ProclabError
from proclab.models.agent import Agent, build_agent
from proclab.models.importers import Format, read_agent
from proclab.models.importers.base import ImportedAgent
from proclab.models.importers.published import PUBLISHED
from proclab.models.importers.source import SourceFile


@dataclass(frozen=True)
class Asked:
    """What the caller says about the environment; ``None`` leaves a fact to the file, the table or the
    default."""

    game: str | None = None
    mode: str | None = None
    split: str | None = None
    backgrounds: bool | None = None
    allow_mismatch: bool = False
    by: str = "command line"
    """Who asks, "command line" or "load": the one-line errors name its options (``--game`` or ``game=``)."""

    def option(self, name: str) -> str:
        return f"--{name.replace('_', '-')}" if self.by == "command line" else f"{name}="


@dataclass(frozen=True)
class Setting:
    """The environment the agent is imported for, and which parts of it were assumed."""

    env: EnvConfig
    said_by: dict[str, str]


@dataclass(frozen=True)
class Conversion:
    """A foreign checkpoint read, converted to proclab's layout, checked, and set in its environment."""

    source: SourceFile
    format: Format
    imported: ImportedAgent
    setting: Setting

    def agent(self) -> Agent:
        """A fresh proclab agent holding the converted weights (on the CPU, trainable)."""
        agent = build_agent(self.imported.config)
        agent.load_state_dict(
            self.imported.weights
        )  # the importer built both: a mismatch is a bug, not input
        return agent


def convert(path: str | Path, format: str = "auto", asked: Asked | None = None) -> Conversion:
    """Read the checkpoint at ``path`` (a file, or a directory holding one), convert it in memory and
    settle its environment; nothing is written."""
    asked = asked or Asked()
    source, fmt, imported = read_agent(path, format)
    setting = resolve_setting(asked, source, imported)
    check_drivable(imported, source, setting.env.game[0])
    return Conversion(source, fmt, imported, setting)


def _pick(name: str, given, from_file, from_table, default, said: dict, file_says: str | None, by: str):
    for value, where in ((given, by), (from_file, file_says), (from_table, "published")):
        if value is not None:
            said[name] = where or "file"
            return value
    said[name] = "assumed"
    return default


def _check_agrees(asked: Asked, source: SourceFile, imported: ImportedAgent) -> None:
    """Refuse a game or mode that contradicts what the file or the published table says."""
    facts, table = imported.facts, PUBLISHED.get(source.sha256)
    for name in ("game", "mode"):
        given = getattr(asked, name)
        known = getattr(facts, name) or (getattr(table, name) if table else None)
        if given is None or known is None or given == known or asked.allow_mismatch:
            continue
        where = (
            facts.said_by if getattr(facts, name) else f"proclab's table of published agents: {table.name}"
        )
        override = (
            f", or add {asked.option('allow_mismatch')} to import it for {given} anyway"
            if asked.by == "command line"
            else ""
        )
        raise ProclabError(
            f"the agent in {str(source.path)!r} was trained in {name} {known} ({where}), not {given}; "
            f"drop {asked.option(name)}{override}"
        )


def resolve_setting(asked: Asked, source: SourceFile, imported: ImportedAgent) -> Setting:
    """The environment the agent plays: the caller's word, then the file's, then the table's, then assumed."""
    _check_agrees(asked, source, imported)
    facts, table = imported.facts, PUBLISHED.get(source.sha256)
    said: dict[str, str] = {}
    by = asked.by
    game = _pick("game", asked.game, facts.game, table and table.game, None, said, facts.said_by, by)
    if game is None:
        raise ProclabError(
            f"{str(source.path)!r} does not say which game its agent plays; pass {asked.option('game')}"
        )
    mode = _pick("mode", asked.mode, facts.mode, table and table.mode, "easy", said, facts.said_by, by)
    split = _pick("split", asked.split, facts.split, table and table.split, "all", said, facts.said_by, by)
    backgrounds = _pick(
        "backgrounds", asked.backgrounds, None, table and table.use_backgrounds, True, said, None, by
    )
    check_game(game, mode)
    parse_split(split)
    env = EnvConfig(game=(game,), mode=mode, split=str(split), use_backgrounds=bool(backgrounds))
    return Setting(env, said)


def check_drivable(imported: ImportedAgent, source: SourceFile, game: str) -> None:
    """Refuse an agent that cannot play Procgen (another action count) or holds NaN or infinite weights."""
    actions = imported.config.num_actions
    if actions != NUM_ACTIONS:
        raise ProclabError(
            f"the agent in {str(source.path)!r} has {actions} policy outputs, but {game} (like every Procgen "
            f"game) takes {NUM_ACTIONS} actions; it was trained for another environment"
        )
    for name, tensor in imported.weights.items():
        if not torch.isfinite(tensor).all():
            raise ProclabError(f"checkpoint {str(source.path)!r}: tensor for {name!r} holds NaN or infinity")
