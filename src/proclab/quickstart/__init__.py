"""``proclab quickstart``: the whole interpreting-rl-behavior pipeline, at a budget's scale, in one folder.

train a recurrent agent -> eval (beside a random agent) -> render -> plot -> record -> wm train
-> wm sample (+ dream quality) -> analyze hidden, env, saliency, behaviours, the intervention sweep
and the direction atlas -> panel export (opening on the atlas),
then ``OUT/index.html`` showing all of it (:mod:`proclab.quickstart.report`). The stages are one table,
:data:`~proclab.quickstart.stages.STAGES`; each is the real command, sized by a
:class:`~proclab.quickstart.budgets.Budget`. ``OUT/quickstart.json`` (the ledger) records every
finished stage with its outputs and seconds, so a rerun continues where a crash stopped it and
``--from STAGE`` redoes a stage and everything after it.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import tyro
from rich.console import Console

from proclab.envs import check_game
from proclab.errors import ProclabError, unknown_choice
from proclab.io.arguments import AGENT
from proclab.io.run_dirs import write_json_atomic
from proclab.quickstart.budgets import budget
from proclab.quickstart.ledger import Ledger
from proclab.quickstart.report import write_report
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


def machine(device: str, precision: str) -> dict[str, str | int | bool]:
    """The CPU (model name, cores, native bf16) and the device and precision this run resolves to."""
    # lazy, as the pipeline below: torch loads when the quickstart runs, not for `proclab quickstart --help`
    import torch

    from proclab.run.runtime import cpu_has_native_bf16, cpu_name, make_runtime  # lazy: as torch above

    rt = make_runtime(device, precision)
    return {
        "cpu": cpu_name(),
        "cores": os.cpu_count() or 1,
        "native_bf16": cpu_has_native_bf16(),
        "device": str(rt.device),
        "precision": "bf16" if rt.bf16 else "fp32",
        "torch": torch.__version__,
    }


def run(args: QuickstartArgs) -> Path:
    # lazy at the command's dispatch: the stages load every layer of the package (torch included), which
    # `proclab quickstart --help` does not need
    from proclab.quickstart.stages import STAGES, Context, Settings

    names = [stage.name for stage in STAGES]
    if args.from_stage is not None and args.from_stage not in names:
        raise unknown_choice("stage", args.from_stage, names)
    if args.agent is None:
        if args.mode not in (None, "easy"):
            raise ProclabError("the quickstart trains in easy mode; --mode only checks an --agent's mode")
        check_game(args.game or "coinrun", "easy")
    elif args.game is not None:
        check_game(args.game, args.mode)
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
    ctx = Context(
        settings,
        budget(args.budget),
        args.out,
        Ledger(args.out, {"budget": args.budget, **asdict(settings)}),
        Console(),
    )
    args.out.mkdir(parents=True, exist_ok=True)
    first = ctx.ledger.first_to_run(names, args.from_stage)
    ctx.ledger.forget_from(names, first)
    for i, stage in enumerate(STAGES):
        if i < first:
            ctx.console.print(f"[dim]{i + 1}/{len(STAGES)} {stage.name}: finished earlier, reused[/dim]")
            continue
        ctx.console.rule(f"[bold]{i + 1}/{len(STAGES)} {stage.name}[/bold]: {stage.title}")
        started = time.perf_counter()
        outputs = stage.run(ctx)
        seconds = time.perf_counter() - started
        ctx.ledger.finish(stage.name, seconds, outputs)
        ctx.console.print(f"[green]{stage.name} finished in {seconds:.1f} s[/green]")
    seconds = ctx.ledger.seconds()
    summary = {
        "game": ctx.agent_env().game[0],
        "agent": ctx.ledger.outputs("train"),
        "budget": args.budget,
        "machine": machine(args.device, args.precision),
        "seconds": seconds,
        "minutes": round(sum(seconds.values()) / 60, 1),
        "outputs": {name: ctx.ledger.outputs(name) for name in names},
    }
    write_json_atomic(args.out / "summary.json", summary)
    page = write_report(args.out, summary)
    ctx.console.rule()
    ctx.console.print(f"report: [bold]{page}[/bold]")
    ctx.console.print(
        f"done: {summary['minutes']} min of stages; outputs in [bold]{args.out.resolve()}[/bold]"
    )
    return args.out


def main(argv: list[str], prog: str = "proclab quickstart") -> None:
    run(tyro.cli(QuickstartArgs, args=argv, prog=prog))
