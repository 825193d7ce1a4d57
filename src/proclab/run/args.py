"""One command line for every trainer: start from a preset, override fields with flags, or ``--resume``.

``proclab train`` (``--preset``, ``--algo``), ``proclab wm train`` (``--size``), ``proclab trex
train`` (``--parity``) and ``proclab trex train-policy`` all parse with :class:`RunArgs`:

* ``--preset NAME`` (or the command's own choosers) picks the defaults; flags override fields;
* ``--resume RUN_DIR`` reads the run's ``config.json`` instead and accepts one flag only
  (``--total-steps`` or ``--total-updates``: train further), because anything else would not be
  the run that was stopped.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from proclab.errors import ProclabError
from proclab.io.checkpoint import find_checkpoint
from proclab.io.runs import read_run_config

C = TypeVar("C")


@dataclass(frozen=True)
class RunArgs(Generic[C]):
    """How one trainer's command line becomes its config (and the run to resume, if any)."""

    prog: str
    flags: Callable[[list[str], C, str, str | None], C]
    """Parse the field flags over the given defaults (tyro), with the program name and the help's description."""
    start: Callable[[dict[str, str | None], list[str]], C]
    """The defaults of a new run from the chooser options' values (e.g. ``{"--preset": "tiny"}``) and the flags."""
    choosers: tuple[str, ...] = ("--preset",)
    """Options taking a value that pick the defaults; given with ``--resume`` they are refused."""
    saved: Callable[[dict, Path], C] | None = None
    """Rebuild a run's ``config.json`` (given with the run directory); None: the command cannot resume."""
    may_change: str = "--total-steps"
    """The one flag ``--resume`` accepts."""
    description: str | None = None

    def parse(self, argv: list[str]) -> tuple[C, Path | None]:
        pre = argparse.ArgumentParser(add_help=False)
        for option in self.choosers:
            pre.add_argument(option, default=None)
        if self.saved is not None:
            pre.add_argument("--resume", type=Path, default=None)
        known, rest = pre.parse_known_args(argv)
        chosen = {option: getattr(known, option[2:].replace("-", "_")) for option in self.choosers}
        resume = getattr(known, "resume", None)
        if resume is None:
            return self.flags(rest, self.start(chosen, rest), self.prog, self.description), None
        extra = [a for a in rest if a.startswith("--") and a.split("=")[0] != self.may_change]
        extra += [option for option, value in chosen.items() if value is not None]
        if extra:
            raise ProclabError(
                f"--resume continues a run with its saved config; drop {', '.join(extra)} "
                f"(only {self.may_change} may change)"
            )
        config = self.saved(read_run_config(resume), resume)
        find_checkpoint(resume)  # fail now, not after building envs, if there is nothing to resume
        return (self.flags(rest, config, self.prog, None) if rest else config), resume
