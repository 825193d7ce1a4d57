"""``proclab quickstart``: the whole pipeline (:mod:`.pipeline`), small, on a CPU, under ``--out``.

Its arguments are torch-free (the runtime group as :class:`~proclab.run.runtime_flags.RuntimeFlags`): the
pipeline, which loads every layer of the package, is imported when the command runs, so that ``proclab
quickstart --help`` answers at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from proclab.io.arguments import AGENT
from proclab.run.runtime_flags import RuntimeFlags


@dataclass(frozen=True)
class QuickstartArgs(RuntimeFlags):
    """Run the proclab pipeline end to end (about 9 minutes on 2 CPU cores by default) under --out. The
    runtime flags apply to training, evaluation, recording and the world model (the agent's video and the
    dreams are computed in fp32 whatever --precision says: saliency re-simulates the dreams in fp32); the
    analyses compute as the quickstart has always run them (the sweep and the atlas on --device, the CPU
    for auto)."""

    out: Path = Path("proclab-demo")
    """Output folder (created if missing; open OUT/index.html afterwards)."""
    budget: str = "small"
    """Scale of every stage: tiny (seconds, for tests), small (under 10 minutes on 2 CPU cores), medium
    (about an hour), paper (interpreting-rl-behavior's scale: days on a GPU)."""
    from_stage: Annotated[str | None, tyro.conf.arg(name="from", metavar="STAGE")] = None
    """Rerun from this stage (train, eval, render, plot, record, wm-train, wm-sample, hidden, env,
    saliency, behaviours, intervene, atlas, panel), reusing the finished ones before it; default: continue after the last
    finished stage of a run with the same settings, or start over."""
    agent: Annotated[Path | None, AGENT] = None
    """Study this agent instead of training one: a proclab run or checkpoint directory, or any checkpoint
    that proclab import takes (train-procgen-pytorch, CleanRL, PufferLib, torchbeast, Cleanba). Its game,
    mode and levels are its own."""
    game: str | None = None
    """Procgen game (easy mode) to train on; default coinrun, the one interpreting-rl-behavior studies. With
    --agent: the game the agent must play (refused if it plays another)."""
    mode: str | None = None
    """With --agent: the mode the agent must have been trained in (refused if not)."""
    seed: int = 1
    """Seed of levels, weights, actions and analyses."""


def quickstart_command(argv: list[str], prog: str = "proclab quickstart") -> None:
    args = tyro.cli(QuickstartArgs, args=argv, prog=prog)
    # lazy at the command's dispatch: the stages load every layer of the package (torch included), which
    # `proclab quickstart --help` does not need
    from proclab.quickstart.pipeline import run_pipeline
    from proclab.quickstart.stages import Settings

    settings = Settings(
        game=args.game or (None if args.agent else "coinrun"),
        seed=args.seed,
        device=args.device,
        precision=args.precision,
        channels_last=args.channels_last,
        torch_threads=args.torch_threads,
        agent=None if args.agent is None else str(args.agent.resolve()),
        mode=args.mode,
    )
    run_pipeline(settings, args.budget, args.out, args.from_stage)
