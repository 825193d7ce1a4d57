"""The quickstart's stages: each is the real command at the budget's scale, in :data:`STAGES` order.

A stage is a function of the :class:`Context` that writes under ``OUT`` and returns its outputs
as JSON values (paths relative to ``OUT``); the ledger keeps them, so a later stage, or a later
run started with ``--from``, finds what an earlier one made. Each stage first removes what a
previous run of it left, so rerunning one never mixes two runs' outputs.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from proclab.io.files import write_json
from proclab.quickstart.budgets import Budget
from proclab.quickstart.ledger import Ledger


@dataclass(frozen=True)
class Settings:
    """What the user chose (:class:`proclab.quickstart.QuickstartArgs` minus the folder and --from)."""

    game: str
    seed: int
    device: str
    precision: str


@dataclass
class Context:
    """What every stage reads: the settings, the budget, the output folder and the ledger."""

    settings: Settings
    budget: Budget
    out: Path
    ledger: Ledger
    console: Console

    def path(self, key: str, stage: str) -> Path:
        """An output path an earlier stage recorded."""
        return self.out / self.ledger.outputs(stage)[key]

    def rel(self, path: Path) -> str:
        return Path(path).resolve().relative_to(self.out.resolve()).as_posix()

    def fresh(self, *names: str) -> list[Path]:
        """``OUT/name`` for each name, with whatever a previous run left there removed."""
        paths = [self.out / name for name in names]
        for p in paths:
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
        return paths

    def runtime(self):
        from proclab.run.runtime import make_runtime

        return make_runtime(self.settings.device, self.settings.precision)


# -- the agent ------------------------------------------------------------------------------------
def train(ctx: Context) -> dict[str, Any]:
    from proclab.config import preset
    from proclab.rl.ppo_train import Trainer

    b, s = ctx.budget, ctx.settings
    (runs,) = ctx.fresh("runs/ppo")
    cfg = preset(b.preset)
    cfg = replace(
        cfg,
        env=replace(cfg.env, game=(s.game,)),
        ppo=replace(cfg.ppo, total_steps=b.train_steps or cfg.ppo.total_steps),
        run_root=runs.parent,
        seed=s.seed,
        name="quickstart",
        device=s.device,
        precision=s.precision,
        time_limit=b.train_seconds or 0,
    )
    trainer = Trainer(cfg)
    run_dir = trainer.train()
    ctx.console.print(f"run directory: {run_dir} ({trainer.global_step:,} steps)")
    return {"run": ctx.rel(run_dir), "steps": trainer.global_step}


def evaluate(ctx: Context) -> dict[str, Any]:
    """The agent on its training levels and on held-out levels, and a uniformly random agent beside it."""
    from proclab.models.scripted import ScriptedAgent
    from proclab.rl.evaluate import EvalArgs, evaluate, run_evaluation

    b, s = ctx.budget, ctx.settings
    (path,) = ctx.fresh("eval.json")
    evaluation = run_evaluation(
        EvalArgs(
            checkpoint=ctx.path("run", "train"),
            split=("train", "test1"),
            episodes=b.eval_episodes,
            seed=s.seed,
            out=path,
            device=s.device,
            precision=s.precision,
        )
    )
    env_config, rt = evaluation.env_config, evaluation.runtime
    random_agent = ScriptedAgent.uniform(evaluation.agent.config.num_actions)
    rows = []
    for split in ("train", "test1"):
        result = evaluate(random_agent, env_config, split, b.eval_episodes, rt, seed=s.seed, envs_per_game=64)
        rows += [r.summary(env_config.mode) for r in result.values()]
    table = evaluation.table
    table["random"] = rows
    write_json(path, table, "evaluation table")
    for row in rows:
        ctx.console.print(f"random agent, {row['split']}: {row['return_mean']:.2f} ± {row['return_std']:.2f}")
    return {"eval": ctx.rel(path)}


def render(ctx: Context) -> dict[str, Any]:
    from proclab.rl.render import RenderArgs
    from proclab.rl.render import render as render_video

    b, s = ctx.budget, ctx.settings
    (path,) = ctx.fresh("agent.mp4")
    video, returns = render_video(
        RenderArgs(
            checkpoint=ctx.path("run", "train"),
            out=path,
            episodes=2,
            max_steps=b.render_steps,
            seed=s.seed,
            device=s.device,
        )
    )
    ctx.console.print(f"video: {video} (episode returns {', '.join(f'{r:g}' for r in returns)})")
    return {"video": ctx.rel(video), "returns": returns}


def plot(ctx: Context) -> dict[str, Any]:
    from proclab.io.plots import plot_runs

    (path,) = ctx.fresh("curves.png")
    curves = plot_runs([ctx.path("run", "train")], path)
    ctx.console.print(f"curves: {curves}")
    return {"curves": ctx.rel(curves)}


def record(ctx: Context) -> dict[str, Any]:
    """Episodes on the training levels (the world model's data) and a few on held-out levels."""
    from proclab.data.record import RecordArgs
    from proclab.data.record import run as run_record

    b, s = ctx.budget, ctx.settings
    train_store, heldout_store = ctx.fresh("episodes", "episodes-heldout")
    run_dir = ctx.path("run", "train")
    common = {"checkpoint": run_dir, "seed": s.seed, "device": s.device, "precision": s.precision}
    store, _ = run_record(RecordArgs(out=train_store, episodes=b.record_episodes, **common))
    heldout, _ = run_record(
        RecordArgs(out=heldout_store, episodes=b.heldout_episodes, split="test1", **common)
    )
    ctx.console.print(f"episode stores: {store} (training levels), {heldout} (held-out levels)")
    return {"episodes": ctx.rel(store), "heldout": ctx.rel(heldout)}


# -- the world model --------------------------------------------------------------------------------
def wm_train(ctx: Context) -> dict[str, Any]:
    from proclab.worldmodel import train_world_model, wm_size

    b, s = ctx.budget, ctx.settings
    (runs,) = ctx.fresh("runs/wm")
    size = wm_size(b.wm_size)
    if b.wm_sim_steps:
        size = replace(size, model=replace(size.model, num_sim_steps=b.wm_sim_steps))
    cfg = replace(
        size,
        data=ctx.path("episodes", "record"),
        total_updates=b.wm_updates or size.total_updates,
        time_limit=b.wm_seconds or 0,
        run_root=runs.parent,
        name="quickstart",
        seed=s.seed,
        num_workers=0,
        video_every=0,
        device=s.device,
        precision=s.precision,
    )
    run_dir = train_world_model(cfg)
    ctx.console.print(f"world model: {run_dir}")
    return {"run": ctx.rel(run_dir)}


def wm_sample(ctx: Context) -> dict[str, Any]:
    """Dreams for the analyses, then how good the dreams are on held-out levels (frame error per step)."""
    from proclab.data import EpisodeStore
    from proclab.worldmodel import SampleArgs, sample_rollouts
    from proclab.worldmodel.checkpoint import load_world_model
    from proclab.worldmodel.frame_error import frame_errors, plot_frame_errors, prediction_strip

    b, s = ctx.budget, ctx.settings
    samples_dir, dream_json, dream_png, strip_png = ctx.fresh(
        "samples", "dream.json", "dream.png", "dream-strip.png"
    )
    wm_run = ctx.path("run", "wm-train")
    samples = sample_rollouts(
        SampleArgs(checkpoint=wm_run, out=samples_dir, n=b.samples, videos=4, seed=s.seed, device=s.device)
    )
    rt = ctx.runtime()
    wm, agent, ckpt = load_world_model(wm_run, rt)
    heldout = EpisodeStore(ctx.path("heldout", "record"))
    quality = frame_errors(
        wm, agent, heldout, ckpt.meta["reward_field"], rt, windows=b.dream_windows, seed=s.seed
    )
    write_json(dream_json, quality, "dream quality", indent=1)
    plot_frame_errors(quality, dream_png)
    prediction_strip(wm, agent, heldout, ckpt.meta["reward_field"], rt, strip_png, seed=s.seed)
    mse = quality["mse"]
    ctx.console.print(
        "frame error (MSE) at steps "
        + ", ".join(map(str, quality["steps"]))
        + ":\n"
        + "\n".join(
            f"  {name:>18}: " + "  ".join(f"{v:.4f}" for v in values if v is not None)
            for name, values in mse.items()
        )
    )
    return {
        "samples": ctx.rel(samples),
        "dream": ctx.rel(dream_json),
        "dream_plot": ctx.rel(dream_png),
        "dream_strip": ctx.rel(strip_png),
    }


# -- the interpretation layer -----------------------------------------------------------------------
def _analysis(ctx: Context, name: str, **given) -> Path:
    """Run ``proclab analyze <name>`` into ``OUT/analysis`` at the budget's preset; ``given`` fields, then
    the budget's overrides for ``name``, replace the preset's."""
    from proclab.interpret.cli import ANALYSES, defaults

    cls, run = ANALYSES[name]
    args = defaults(cls, ctx.budget.analysis)
    fields = {
        "out": ctx.out / "analysis",
        "seed": ctx.settings.seed,
        **given,
        **ctx.budget.overrides.get(name, {}),
    }
    args = replace(args, **fields)
    out = run(args)
    ctx.console.print(f"outputs in {out}")
    return out


def hidden(ctx: Context) -> dict[str, Any]:
    ctx.fresh("analysis")
    out = _analysis(
        ctx, "hidden", data=ctx.path("episodes", "record"), samples=ctx.path("samples", "wm-sample")
    )
    return {"folder": ctx.rel(out)}


def env(ctx: Context) -> dict[str, Any]:
    ctx.fresh("analysis/env")
    return {"folder": ctx.rel(_analysis(ctx, "env"))}


def saliency(ctx: Context) -> dict[str, Any]:
    ctx.fresh("analysis/saliency")
    out = _analysis(ctx, "saliency", target=("value", "action", "ic:0-3"), env_grads="both")
    return {"folder": ctx.rel(out)}


def behaviours(ctx: Context) -> dict[str, Any]:
    ctx.fresh("analysis/behaviours")
    return {"folder": ctx.rel(_analysis(ctx, "behaviours"))}


def panel(ctx: Context) -> dict[str, Any]:
    from proclab.panel.export import ExportArgs, export

    (path,) = ctx.fresh("panel")
    args = ExportArgs(
        analysis=ctx.out / "analysis",
        out=path,
        eval=(ctx.path("eval", "eval"),),
        title=f"proclab quickstart: {ctx.settings.game}",
        seed=ctx.settings.seed,
    )
    out = export(replace(args, **ctx.budget.overrides.get("panel", {})))
    ctx.console.print(f"panel: {out} (open it with: proclab panel serve {out})")
    return {"folder": ctx.rel(out)}


@dataclass(frozen=True)
class Stage:
    name: str
    title: str
    run: Callable[[Context], dict[str, Any]]


STAGES: tuple[Stage, ...] = (
    Stage("train", "PPO: a recurrent agent", train),
    Stage("eval", "training vs held-out levels, beside a random agent", evaluate),
    Stage("render", "what the agent sees", render),
    Stage("plot", "training curves", plot),
    Stage("record", "episodes with the agent's internals", record),
    Stage("wm-train", "the agent-environment simulator", wm_train),
    Stage("wm-sample", "the agent dreaming, and how good the dreams are", wm_sample),
    Stage("hidden", "hidden-state basis, clusters, t-SNE", hidden),
    Stage("env", "the simulator's environment states", env),
    Stage("saliency", "what the value, the action and the first ICs depend on", saliency),
    Stage("behaviours", "behaviour clusters of the dreams", behaviours),
    Stage("panel", "the interactive panel", panel),
)
"""Every stage in order: ``--from NAME`` takes one of these names."""
