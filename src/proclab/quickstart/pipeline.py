"""The quickstart's stages run in order into one folder: what was finished is reused (the ledger), then the
summary and the report (``OUT/summary.json``, ``OUT/index.html``)."""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path

import torch
from rich.console import Console

from proclab.envs import check_game
from proclab.errors import ProclabError, unknown_choice
from proclab.io.run_dirs import write_json_atomic
from proclab.quickstart.budgets import budget
from proclab.quickstart.ledger import Ledger
from proclab.quickstart.report import write_report
from proclab.quickstart.stages import STAGES, Context, Settings
from proclab.run.runtime import cpu_has_native_bf16, cpu_name, make_runtime


def machine(device: str, precision: str) -> dict[str, str | int | bool]:
    """The CPU (model name, cores, native bf16) and the device and precision this run resolves to."""
    rt = make_runtime(device, precision)
    return {
        "cpu": cpu_name(),
        "cores": os.cpu_count() or 1,
        "native_bf16": cpu_has_native_bf16(),
        "device": str(rt.device),
        "precision": "bf16" if rt.bf16 else "fp32",
        "torch": torch.__version__,
    }


def run_pipeline(settings: Settings, budget_name: str, out: Path, from_stage: str | None = None) -> Path:
    """Every stage at the scale of budget ``budget_name`` into ``out``: from ``from_stage`` on (every stage
    after it redone), else after the last stage a run with the same settings finished; returns ``out``."""
    names = [stage.name for stage in STAGES]
    if from_stage is not None and from_stage not in names:
        raise unknown_choice("stage", from_stage, names)
    if settings.agent is None:
        if settings.mode not in (None, "easy"):
            raise ProclabError("the quickstart trains in easy mode; --mode only checks an --agent's mode")
        check_game(settings.game, "easy")
    elif settings.game is not None:
        check_game(settings.game, settings.mode)
    ctx = Context(
        settings,
        budget(budget_name),
        out,
        Ledger(out, {"budget": budget_name, **asdict(settings)}),
        Console(),
    )
    out.mkdir(parents=True, exist_ok=True)
    first = ctx.ledger.first_to_run(names, from_stage)
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
        "budget": budget_name,
        "machine": machine(settings.device, settings.precision),
        "seconds": seconds,
        "minutes": round(sum(seconds.values()) / 60, 1),
        "outputs": {name: ctx.ledger.outputs(name) for name in names},
    }
    write_json_atomic(out / "summary.json", summary)
    page = write_report(out, summary)
    ctx.console.rule()
    ctx.console.print(f"report: [bold]{page}[/bold]")
    ctx.console.print(f"done: {summary['minutes']} min of stages; outputs in [bold]{out.resolve()}[/bold]")
    return out
