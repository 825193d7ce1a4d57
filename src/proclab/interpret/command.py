"""``proclab analyze <analysis>``: every interpretation command, dispatched through one registry.

Each analysis is a typed, frozen arguments dataclass (a subclass of :class:`AnalysisArgs`,
whose field docstrings are the ``--help`` text) and a run function that takes the parsed
arguments, writes into the analysis folder and returns the folder of its outputs; both live in the
``command`` module of the analysis' room (``interpret/<room>/command.py``), which hands the room's library
its settings. Adding an analysis is one line in :data:`ANALYSES`. Analysis modules import their heavy libraries
(scikit-learn, openTSNE, matplotlib) inside their run functions, so ``--help`` stays fast.

``--preset NAME`` picks the defaults (each arguments class lists its presets in
``PRESETS``; ``paper`` is the interpreting-rl-behavior analyses' scale, ``small`` the
quickstart's); flags given after it override single fields. A spelling that was renamed
(:data:`RENAMED`) is refused in one line naming its new one.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path

import tyro

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.atlas.command import AtlasArgs, CompareBasesArgs, run_atlas, run_compare_bases
from proclab.interpret.behaviours.command import (
    BehavioursArgs,
    ConsistencyArgs,
    XcorrArgs,
    run_behaviours,
    run_consistency,
    run_xcorr,
)
from proclab.interpret.goals.command import DecisionSquareArgs, run_decision_square
from proclab.interpret.interventions.command import (
    HookEditArgs,
    InterveneArgs,
    InterveneSimArgs,
    run_edit,
    run_intervene,
    run_intervene_sim,
)
from proclab.interpret.probes.command import ProbeArgs, run_probe
from proclab.interpret.saliency.command import SaliencyArgs, VisualizeArgs, run_saliency, run_visualize
from proclab.interpret.states.command import (
    BottleneckArgs,
    EnvArgs,
    HiddenArgs,
    run_bottleneck,
    run_env,
    run_hidden,
)
from proclab.interpret.steering.command import SteerArgs, run_steer
from proclab.interpret.sweep.command import SweepArgs, run_sweep
from proclab.interpret.workspace.command import AnalysisArgs
from proclab.interpret.workspace.folder import discard_staged, published_path
from proclab.io.files import DiskFullError

ANALYSES: dict[str, tuple[type[AnalysisArgs], Callable[..., Path]]] = {
    "hidden": (HiddenArgs, run_hidden),
    "env": (EnvArgs, run_env),
    "bottleneck": (BottleneckArgs, run_bottleneck),
    "saliency": (SaliencyArgs, run_saliency),
    "behaviours": (BehavioursArgs, run_behaviours),
    "xcorr": (XcorrArgs, run_xcorr),
    "consistency": (ConsistencyArgs, run_consistency),
    "edit": (HookEditArgs, run_edit),
    "intervene": (InterveneArgs, run_intervene),
    "intervene-sim": (InterveneSimArgs, run_intervene_sim),
    "sweep": (SweepArgs, run_sweep),
    "visualize": (VisualizeArgs, run_visualize),
    "atlas": (AtlasArgs, run_atlas),
    "compare-bases": (CompareBasesArgs, run_compare_bases),
    "probe": (ProbeArgs, run_probe),
    "steer": (SteerArgs, run_steer),
    "decision-square": (DecisionSquareArgs, run_decision_square),
}
RENAMED: dict[str, str] = {
    "analyze intervene --sweep": "analyze sweep",
    "analyze intervene --hook": "analyze edit",
    "analyze intervene --edit": "analyze edit",
    "analyze intervene --where real": "analyze intervene",
    "analyze intervene --where sim": "analyze intervene-sim",
    "analyze intervene --where both": "analyze intervene, then analyze intervene-sim",
    "analyze intervene --samples": "analyze intervene-sim --samples",
    "analyze intervene --wm": "analyze intervene-sim --wm",
    "analyze intervene --n": "analyze intervene-sim --n",
    "analyze intervene --batch-size": "analyze intervene-sim --batch-size",
    "--checkpoint": "--agent",
}
"""Old spelling -> new spelling, as typed after ``proclab``. An entry that starts with a flag is that flag in
any analysis; words after a command's name match wherever they stand among its arguments."""


def renamed(argv: list[str]) -> str | None:
    """The one-line answer to ``argv`` (after ``proclab``) if it spells a renamed command or flag, else None."""
    words = [part for a in argv for part in (a.split("=", 1) if a.startswith("--") else [a])]
    for old, new in RENAMED.items():
        spelled = old.split()
        n = next((i for i, w in enumerate(spelled) if w.startswith("-")), len(spelled))
        command, options, rest = spelled[:n], spelled[n:], words[n:]
        if words[:n] == command and (
            not options or any(rest[i : i + len(options)] == options for i in range(len(rest)))
        ):
            return f"'{old}' is now '{new}'"
    return None


def _usage(prog: str) -> str:
    rows = "\n".join(
        f"  {name:<20}{(cls.__doc__ or '').strip().splitlines()[0]}" for name, (cls, _) in ANALYSES.items()
    )
    return (
        f"usage: {prog} ANALYSIS --out ANALYSIS_DIR [--preset NAME] [options]\n\n"
        f"analyses (all write into one analysis folder, see docs/analyses.md):\n{rows}\n\n"
        f"Run '{prog} ANALYSIS --help' for an analysis' options."
    )


def defaults(cls: type[AnalysisArgs], preset: str) -> AnalysisArgs:
    """The arguments of preset ``preset`` (required fields left for the command line)."""
    if preset not in cls.PRESETS:
        raise unknown_choice("preset", preset, cls.PRESETS)
    required = {f.name: tyro.MISSING for f in fields(cls) if f.name == "out"}
    return replace(cls(**required), **cls.PRESETS[preset])


def parse(cls: type[AnalysisArgs], argv: list[str], prog: str) -> AnalysisArgs:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", default="paper")
    known, rest = pre.parse_known_args(argv)
    doc = inspect.cleandoc(cls.__doc__ or "")
    description = (
        f"{doc}\n\n--preset NAME   start from named defaults: {', '.join(cls.PRESETS)} (default paper)"
    )
    return tyro.cli(cls, args=rest, default=defaults(cls, known.preset), prog=prog, description=description)


def analyze_command(argv: list[str], prog: str = "proclab analyze") -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage(prog))
        sys.exit(0)
    answer = renamed(["analyze", *argv])
    if answer is not None:
        raise ProclabError(answer)
    name = argv[0]
    if name not in ANALYSES:
        raise unknown_choice("analysis", name, ANALYSES)
    cls, run = ANALYSES[name]
    args = parse(cls, argv[1:], f"{prog} {name}")
    try:
        out = run(args)
    except DiskFullError as err:  # name the output the user knows, not its staging copy
        raise DiskFullError(published_path(err.path), err.what, err.err) from None
    finally:  # a failed command (an error, a full disk) leaves no staging folder behind
        discard_staged(args.out)
    print(f"outputs in {out}")
