"""One command line for every trainer: start from a preset, override fields with flags, or ``--resume``.

``proclab train`` (``--preset``, ``--algo``; also on a learned reward, ``--reward-model``), ``proclab wm
train`` and ``proclab trex train`` all parse with :class:`RunParser`:

* ``--preset NAME`` (and ``train``'s ``--algo``) picks the defaults; flags override fields;
* ``--resume RUN_DIR`` reads the run's ``config.json`` instead and accepts one flag only
  (``--total-steps``, ``--total-updates`` or ``--max-epochs``: train further), because anything
  else would not be the run that was stopped.

**Finished runs.** ``--resume`` of a run whose last checkpoint already reached its end does
nothing and says so (:class:`~proclab.errors.NothingToDo`, exit status 0): resuming never
changes a finished result behind the user's back. Training further is explicit (``--resume RUN
--total-steps N``, N beyond the last checkpoint), and the change is written to the run's
``config.json`` with a line in ``config_history.jsonl`` (:func:`~proclab.io.run_dirs.record_config_change`),
so the run says how it came to be trained for longer.

**Repeated game lists.** ``--game`` given twice (``--game starpilot --game coinrun``) is refused:
the parser would keep the last list and silently drop the games before it (other options keep
the usual rule, the last value given wins). A game repeated inside one list is refused by
:func:`~proclab.envs.games.resolve_games`: multi-task runs split their envs evenly over distinct
games, and repetition is not a weighting syntax.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from proclab.errors import NothingToDo, ProclabError
from proclab.io.checkpoint import find_checkpoint, load_checkpoint_meta
from proclab.io.configs import to_dict
from proclab.io.run_dirs import read_run_config, record_config_change

C = TypeVar("C")


@dataclass(frozen=True)
class RunParser(Generic[C]):
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
    """The flag ``--resume`` accepts that sets where the run ends."""
    session_flags: tuple[str, ...] = ()
    """Flags ``--resume`` also accepts because they bound only this session, not the result (a time limit)."""
    end_step: Callable[[C], int] | None = None
    """The checkpoint step at which a run of this config is complete (``meta.json``'s ``step``)."""
    checkpoint: Callable[[Path], Path] = find_checkpoint
    """The checkpoint of a run directory that ``--resume`` continues from."""
    description: str | None = None

    def parse(self, argv: list[str]) -> tuple[C, Path | None]:
        if _options(argv).count("--game") > 1:
            raise ProclabError(
                "--game is given more than once and only the last list would count; give it once "
                "with every game after it (e.g. --game starpilot coinrun)"
            )
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
        accepted = (self.may_change, *self.session_flags)
        extra = [a for a in rest if a.startswith("--") and a.split("=")[0] not in accepted]
        extra += [option for option, value in chosen.items() if value is not None]
        if extra:
            raise ProclabError(
                f"--resume continues a run with its saved config; drop {', '.join(extra)} "
                f"(only {self.may_change} may change)"
            )
        config = self.saved(read_run_config(resume), resume)
        meta = load_checkpoint_meta(self.checkpoint(resume))  # fail now if there is nothing to resume
        new = self.flags(rest, config, self.prog, None) if rest else config
        if self.end_step is not None:
            self._check_progress(resume, config, new, meta)
        return new, resume

    def _check_progress(self, run: Path, config: C, new: C, meta: dict) -> None:
        """Refuse to resume a finished run unless asked for more; record what was asked."""
        step, end, flag = int(meta.get("step", 0)), self.end_step(config), self.may_change
        if self.end_step(new) == end:  # the same end (a session flag may have changed)
            if step >= end or meta.get("finished"):
                raise NothingToDo(
                    f"run {str(run)!r} is already finished (last checkpoint at {step:,} of {end:,}); "
                    f"nothing to do. To train it further: {self.prog} --resume {run} {flag} N "
                    f"(N > {step:,})"
                )
            if new != config and _is_rank0():
                old, now = to_dict(config), to_dict(new)
                record_config_change(run, now, _changes(old, now), step)
            return
        if meta.get("finished") and step < end:
            raise ProclabError(
                f"run {str(run)!r} stopped on its own at {step:,} ({meta['finished']}); "
                f"{flag} would not train it further"
            )
        if self.end_step(new) <= step:
            raise ProclabError(
                f"{flag} {self.end_step(new):,} does not go beyond the run's last checkpoint at {step:,}; "
                "give a larger value to train further"
            )
        if _is_rank0():
            old, now = to_dict(config), to_dict(new)
            record_config_change(run, now, _changes(old, now), step)


def _options(argv: list[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in argv if a.startswith("--") and len(a) > 2]


def _changes(old: dict, new: dict, prefix: str = "") -> dict[str, tuple[Any, Any]]:
    """``{"ppo.total_steps": (old, new)}`` for every field of two config dicts that differs."""
    out: dict[str, tuple[Any, Any]] = {}
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out |= _changes(a, b, f"{prefix}{key}.")
        elif a != b:
            out[prefix + key] = (a, b)
    return out


def _is_rank0() -> bool:
    """Whether this process writes the run's files: torchrun's rank 0 (``RANK`` is set before the
    process group exists), or a plain process."""
    return os.environ.get("RANK", "0") == "0"
