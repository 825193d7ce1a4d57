"""The names the command line gives to what commands read, one each (docs/architecture.md, "Conventions of
the command line"):

* ``AGENT``: an agent, a proclab run or checkpoint directory, always given as ``--agent AGENT`` (several:
  ``--agents AGENT [AGENT ...]``) and loaded by :func:`proclab.models.loading.load_agent`;
* ``WM``: a world model, a ``proclab wm train`` run or checkpoint directory, the positional argument of the
  ``wm`` commands that act on one;
* ``DATA``: an episode store that a command reads, always ``--data DATA`` (what a command writes is ``--out``).

A field spells one with ``Annotated[Path, AGENT]`` (``tyro.conf.Positional`` added for ``WM``);
``tests/test_cli.py`` checks every command against these rules. A command hands the library its settings,
never what it parsed (:func:`settings_from`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated, TypeVar

import tyro

S = TypeVar("S")

AGENT = tyro.conf.arg(metavar="AGENT")
WM = tyro.conf.arg(metavar="WM")
DATA = tyro.conf.arg(metavar="DATA")
REWARD_MODEL = tyro.conf.arg(metavar="REWARD_MODEL")
AGENTS = tyro.conf.arg(metavar="AGENT [AGENT ...]")
REWARD_MODELS = tyro.conf.arg(metavar="REWARD_MODEL [REWARD_MODEL ...]")
RULE = tyro.conf.arg(metavar="RULE")


@dataclass(frozen=True, kw_only=True)
class LevelRuleFlag:
    """``--level-rule``, for the commands that play an agent on levels (eval, record, the sweep, steering)."""

    level_rule: Annotated[str | None, RULE] = None
    """Edit every level at its start by this rule (proclab.envs.rules, docs/misgeneralization.md): coin-moved[:percent=P,
    place=sections|floor,seed=S] for CoinRun, cheese-region[:size=R,seed=S] for Maze, or none. Default: the
    rule the agent was trained with (none for most agents)."""


def settings_from(args: object, cls: type[S], **given) -> S:
    """The library's settings ``cls`` (a dataclass) of a parsed command line ``args``: each field is the field
    of ``args`` of the same name, unless ``given``. Commands call the library with these, so that no library
    function depends on a parser's object."""
    taken = {f.name: getattr(args, f.name) for f in fields(cls) if f.init and f.name not in given}
    return cls(**taken, **given)
