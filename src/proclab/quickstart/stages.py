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

from proclab.envs import EnvConfig, held_out_split
from proclab.errors import ProclabError
from proclab.interpret.atlas.command import AtlasArgs, run_atlas
from proclab.interpret.command import ANALYSES, defaults
from proclab.interpret.interventions.arms import DEFAULT_ARMS
from proclab.interpret.sweep.command import SweepArgs, run_sweep
from proclab.io.checkpoint import find_checkpoint, load_checkpoint
from proclab.io.configs import from_dict
from proclab.io.files import write_json
from proclab.models.config import STATELESS_CORES
from proclab.models.importers.run_dir import import_run
from proclab.models.importers.setting import Asked
from proclab.panel.export import PanelSettings, export
from proclab.quickstart.budgets import Budget
from proclab.quickstart.ledger import Ledger
from proclab.record.command import RecordArgs
from proclab.record.command import run as run_record
from proclab.rl.command import EvalArgs, run_evaluation
from proclab.rl.curves import plot_runs
from proclab.rl.ppo_train import Trainer, preset_config
from proclab.rl.render import RenderSettings
from proclab.rl.render import render as render_video
from proclab.run.runtime import RuntimeConfig
from proclab.store import EpisodeStore
from proclab.worldmodel import train_world_model, wm_size
from proclab.worldmodel.checkpoint import load_world_model
from proclab.worldmodel.frame_error import frame_errors, plot_frame_errors, prediction_strip
from proclab.worldmodel.sample import SamplingSettings, sample_rollouts


@dataclass(frozen=True)
class Settings:
    """What the user chose (:class:`proclab.quickstart.command.QuickstartArgs` minus the folder, the budget and
    --from)."""

    game: str | None
    """The game to train on; with ``agent``, the game the agent must play (None: its own)."""
    seed: int
    device: str
    precision: str
    channels_last: bool
    torch_threads: int
    agent: str | None = None
    """A trained agent to study instead of training one: a proclab run or checkpoint, or any file
    ``proclab import`` takes."""
    mode: str | None = None
    """With ``agent``: the mode it must have been trained in (None: its own)."""


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

    def runtime_flags(self) -> dict[str, Any]:
        """The runtime fields of every command a stage runs (the analyses' excepted): the user's."""
        s = self.settings
        return {
            "device": s.device,
            "precision": s.precision,
            "channels_last": s.channels_last,
            "torch_threads": s.torch_threads,
        }

    def runtime(self):
        return RuntimeConfig(**self.runtime_flags()).runtime()

    def agent_meta(self) -> dict:
        return load_checkpoint(self.path("run", "train"), kind="agent").meta

    def agent_env(self):
        """The environment of the studied agent's checkpoint (its game, mode and training levels)."""
        return from_dict(EnvConfig, self.agent_meta()["env"])

    def state_source(self) -> dict[str, Any]:
        """What the analyses read as the agent's state: its recorded state, or, for an agent without
        one (a feed-forward agent imported from CleanRL or Cleanba), the torso's features, replayed."""
        if self.agent_meta()["agent"]["core"] not in STATELESS_CORES:
            return {}
        return {"hook": "torso.hook_fc", "agent": self.path("run", "train")}

    def splits(self) -> dict[str, str]:
        """Level splits to study the agent on -> their role: its training levels and levels it never saw."""
        train = self.agent_env().split
        held_out = held_out_split(train)
        if held_out is None:
            return {train: "every level (the agent may have seen any of them)"}
        return {train: "training levels", str(held_out): "held-out levels"}


# -- the agent ------------------------------------------------------------------------------------
def train(ctx: Context) -> dict[str, Any]:
    """PPO on the quickstart preset; or, with ``--agent``, the given agent instead (see :func:`adopt`)."""
    if ctx.settings.agent is not None:
        return adopt(ctx)
    b, s = ctx.budget, ctx.settings
    (runs,) = ctx.fresh("runs/ppo")
    cfg = preset_config(
        s.game, b.preset, steps=b.train_steps, seconds=b.train_seconds, seed=s.seed, runs=runs.parent,
        name="quickstart", **ctx.runtime_flags(),
    )  # fmt: skip
    trainer = Trainer(cfg)
    run_dir = trainer.train()
    ctx.console.print(f"run directory: {run_dir} ({trainer.global_step:,} steps)")
    return {"run": ctx.rel(run_dir), "steps": trainer.global_step}


def adopt(ctx: Context) -> dict[str, Any]:
    """The agent to study: a proclab run or checkpoint as it is, or any other checkpoint imported into
    ``OUT/runs/import/agent``; refused in one line if it plays another game or mode than asked."""
    s = ctx.settings
    (runs,) = ctx.fresh("runs/import")
    try:
        run, imported = find_checkpoint(s.agent).resolve(), False
    except ProclabError:
        run, _ = import_run(Path(s.agent), Asked(game=s.game, mode=s.mode), out=runs / "agent")
        imported = True
    ckpt = load_checkpoint(run, kind="agent")
    env = ckpt.meta["env"]
    for name, asked, own in (("game", s.game, env["game"][0]), ("mode", s.mode, env["mode"])):
        if asked is not None and asked != own:
            raise ProclabError(f"the agent in {s.agent!r} plays {name} {own!r}, not {asked!r}; drop --{name}")
    where = ctx.rel(run) if imported else str(run)
    ctx.console.print(f"agent: {where} ({env['game'][0]} {env['mode']}, step {ckpt.step:,})")
    return {"run": where, "steps": ckpt.step, "imported": imported}


def evaluate(ctx: Context) -> dict[str, Any]:
    """The agent on its training levels and on held-out levels, and a uniformly random agent beside it."""
    b, s = ctx.budget, ctx.settings
    (path,) = ctx.fresh("eval.json")
    roles = ctx.splits()
    evaluation = run_evaluation(
        EvalArgs(
            agent=ctx.path("run", "train"),
            split=tuple(roles),
            episodes=b.eval_episodes,
            seed=s.seed,
            random_baseline=True,
            **ctx.runtime_flags(),
        )
    )
    table = {**evaluation.table, "roles": roles}
    write_json(path, table, "evaluation table")
    return {"eval": ctx.rel(path)}


def render(ctx: Context) -> dict[str, Any]:
    """The agent's video, its outputs in fp32 (the video the quickstart has always made)."""
    b, s = ctx.budget, ctx.settings
    (path,) = ctx.fresh("agent.mp4")
    video, returns = render_video(
        ctx.path("run", "train"),
        path,
        RenderSettings(episodes=2, max_steps=b.render_steps, seed=s.seed),
        RuntimeConfig(**{**ctx.runtime_flags(), "precision": "fp32"}),
    )
    ctx.console.print(f"video: {video} (episode returns {', '.join(f'{r:g}' for r in returns)})")
    return {"video": ctx.rel(video), "returns": returns}


def plot(ctx: Context) -> dict[str, Any]:
    (path,) = ctx.fresh("curves.png")
    if not (ctx.path("run", "train") / "metrics.csv").is_file():
        ctx.console.print("no training curves: the agent was trained elsewhere")
        return {"curves": None}
    curves = plot_runs([ctx.path("run", "train")], path)
    ctx.console.print(f"curves: {curves}")
    return {"curves": ctx.rel(curves)}


def record(ctx: Context) -> dict[str, Any]:
    """Episodes on the training levels (the world model's data) and a few on held-out levels."""
    b, s = ctx.budget, ctx.settings
    train_store, heldout_store = ctx.fresh("episodes", "episodes-heldout")
    run_dir = ctx.path("run", "train")
    held_out = list(ctx.splits())[-1]  # the held-out levels, or every level when there are none
    common = {"agent": run_dir, "seed": s.seed, **ctx.runtime_flags()}
    store, _ = run_record(RecordArgs(out=train_store, episodes=b.record_episodes, **common))
    heldout, _ = run_record(
        RecordArgs(out=heldout_store, episodes=b.heldout_episodes, split=held_out, **common)
    )
    ctx.console.print(f"episode stores: {store} (training levels), {heldout} (held-out levels)")
    return {"episodes": ctx.rel(store), "heldout": ctx.rel(heldout)}


# -- the world model --------------------------------------------------------------------------------
def wm_train(ctx: Context) -> dict[str, Any]:
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
        **ctx.runtime_flags(),
    )
    run_dir = train_world_model(cfg.data, cfg).run_dir
    ctx.console.print(f"world model: {run_dir}")
    return {"run": ctx.rel(run_dir)}


def wm_sample(ctx: Context) -> dict[str, Any]:
    """Dreams for the analyses (simulated in fp32: saliency re-simulates them in fp32), then how good the
    dreams are on held-out levels (frame error per step)."""
    b, s = ctx.budget, ctx.settings
    samples_dir, dream_json, dream_png, strip_png = ctx.fresh(
        "samples", "dream.json", "dream.png", "dream-strip.png"
    )
    wm_run = ctx.path("run", "wm-train")
    runtime = {**ctx.runtime_flags(), "precision": "fp32"}
    samples = sample_rollouts(
        wm_run, samples_dir, SamplingSettings(n=b.samples, videos=4, seed=s.seed), RuntimeConfig(**runtime)
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
FP32 = {"precision": "fp32", "torch_threads": 0}
"""The arithmetic and thread count the quickstart's analyses computed with before every analysis took the
runtime group (fp32; torch's default threads), passed explicitly so that its outputs stay the same."""


def _analysis(ctx: Context, name: str, **given) -> Path:
    """Run ``proclab analyze <name>`` into ``OUT/analysis`` at the budget's preset; ``given`` fields, then
    the budget's overrides for ``name``, replace the preset's."""
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
        ctx,
        "hidden",
        data=ctx.path("episodes", "record"),
        samples=ctx.path("samples", "wm-sample"),
        device="auto",
        **FP32,
        **ctx.state_source(),
    )
    return {"folder": ctx.rel(out)}


def env(ctx: Context) -> dict[str, Any]:
    ctx.fresh("analysis/env")
    return {"folder": ctx.rel(_analysis(ctx, "env"))}


def saliency(ctx: Context) -> dict[str, Any]:
    ctx.fresh("analysis/saliency")
    out = _analysis(
        ctx, "saliency", target=("value", "action", "ic:0-3"), env_grads="both", device="auto", **FP32
    )
    return {"folder": ctx.rel(out)}


def behaviours(ctx: Context) -> dict[str, Any]:
    ctx.fresh("analysis/behaviours")
    return {"folder": ctx.rel(_analysis(ctx, "behaviours", device="cpu", **FP32))}


def _replay_args(ctx: Context, cls, name: str, **given):
    """Arguments of an analysis that replays the agent (the sweep, the atlas) on ``OUT/analysis`` at the
    budget's preset, on the CPU unless a device was chosen; ``given``, then the budget's overrides for
    ``name``, replace the preset's fields."""
    s = ctx.settings
    device = "cpu" if s.device == "auto" else s.device
    fields = {"out": ctx.out / "analysis", "seed": s.seed, "device": device, **given}
    return replace(defaults(cls, ctx.budget.analysis), **fields, **ctx.budget.overrides.get(name, {}))


ON_DATA_ARMS = ",".join(arm for arm in DEFAULT_ARMS if arm != "collapse")
"""The quickstart sweep's arms: the sweep's defaults but increment-collapse."""


def intervene(ctx: Context) -> dict[str, Any]:
    """The intervention sweep: every IC held at on-data values (mean, a resampled recorded value, the 5th
    and 95th percentiles) on paired held-out levels of the real game. Increment-collapse is left to
    ``analyze sweep``: it holds most ICs off the data, where a competent agent times out
    on every level (1,000 steps an episode), which alone made this stage the quickstart's longest."""
    ctx.fresh("analysis/sweep")
    if ctx.state_source():
        ctx.console.print("no sweep: a feed-forward agent carries no state whose directions could be held")
        return {"folder": None}
    split = list(ctx.splits())[-1]
    args = _replay_args(
        ctx, SweepArgs, "intervene", split=split, arms=ON_DATA_ARMS, precision="auto", torch_threads=0
    )
    out = run_sweep(args)
    ctx.console.print(f"outputs in {out}")
    return {"folder": ctx.rel(out)}


def atlas(ctx: Context) -> dict[str, Any]:
    """The direction atlas of the ICs on the recorded episodes: what activates each, what it tracks, what the
    sweep says it causes, what it looks at, and whether gradients predicted it. The panel opens on it."""
    ctx.fresh("analysis/atlas")
    if ctx.state_source():
        ctx.console.print(
            "no atlas: a feed-forward agent carries no state whose directions could be described"
        )
        return {"folder": None}
    out = run_atlas(_replay_args(ctx, AtlasArgs, "atlas", **FP32))
    ctx.console.print(f"outputs in {out}")
    return {"folder": ctx.rel(out)}


def panel(ctx: Context) -> dict[str, Any]:
    (path,) = ctx.fresh("panel")
    settings = PanelSettings(
        eval=(ctx.path("eval", "eval"),),
        title=f"proclab quickstart: {ctx.agent_env().game[0]}",
        seed=ctx.settings.seed,
    )
    out = export(ctx.out / "analysis", path, replace(settings, **ctx.budget.overrides.get("panel", {})))
    ctx.console.print(f"panel: {out} (open it with: proclab panel serve {out})")
    return {"folder": ctx.rel(out)}


@dataclass(frozen=True)
class Stage:
    name: str
    title: str
    run: Callable[[Context], dict[str, Any]]


STAGES: tuple[Stage, ...] = (
    Stage("train", "PPO: a recurrent agent (or, with --agent, the agent to study)", train),
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
    Stage("intervene", "every IC held at on-data values, in the real game", intervene),
    Stage("atlas", "one card per IC: what activates, tracks and causes it", atlas),
    Stage("panel", "the interactive panel, opening on the atlas", panel),
)
"""Every stage in order: ``--from NAME`` takes one of these names."""
