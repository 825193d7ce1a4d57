"""The ``proclab trex`` commands: ``demos`` (:mod:`.record_demos`), ``train`` (:mod:`.train`, with ``--preset``,
flags and ``--resume``), ``grid`` (:mod:`.grid`), ``evaluate`` (:func:`~proclab.reward.evaluation.evaluate_trex` of
each reward model given, printed and written as one JSON list of reports,
:meth:`~proclab.reward.evaluation.TrexEvaluation.report`), ``plot`` (:mod:`.plots`) and ``demo-video``
(:mod:`.demo_video`).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, Literal

import tyro

from proclab.errors import ProclabError
from proclab.io.arguments import AGENTS, DATA, REWARD_MODEL, REWARD_MODELS, settings_from
from proclab.io.configs import from_dict
from proclab.io.files import write_json
from proclab.reward.demo_video import write_demo_video
from proclab.reward.evaluation import TrexEvaluationSettings, evaluate_trex
from proclab.reward.grid import GridSettings, finished_cells, run_grid
from proclab.reward.nets import RewardModel
from proclab.reward.plots import plot_correlations, plot_predictions, read_rows
from proclab.reward.record_demos import record_demos
from proclab.reward.train import PROGRESS, TREX_PRESETS, TrexConfig, append_summary, train_trex, trex_preset
from proclab.run.parser import RunParser
from proclab.run.runtime import RuntimeConfig


# -- trex demos -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DemosArgs(RuntimeConfig):
    """Record T-REX demos: one sampled episode per demo, each on its own level, by a checkpoint drawn at
    random from the agents'."""

    agents: Annotated[tuple[Path, ...], AGENTS]
    """The agents: proclab run or checkpoint directories (a run: all of its periodic checkpoints, which
    vary in skill)."""
    out: Path = Path("demos")
    """Demo store to add to (created if missing)."""
    num: int = 100
    """Demos to record."""
    split: Literal["train", "test"] = "train"
    """train: demos to learn from; test: held-out-level demos to measure the learned reward on."""
    game: str | None = None
    """Game to play (default: the agents' game)."""
    levels: str | None = None
    """Level range START:NUM to draw from (default: [0, 1e9) for train, [1e9, 2e9) for test)."""
    max_len: int = 1000
    """Cut an episode after this many steps (the seed's max_ep_len)."""
    use_backgrounds: bool | None = None
    """Draw the game backgrounds (the seed's --use_backgrounds; they may leak time cues); default: as the
    first agent was trained (an agent trained without them plays worse with them)."""
    num_envs: int = 16
    """Demos played at once per checkpoint."""
    seed: int = 0
    """Seed of the level draw, the checkpoint draw and action sampling."""


def demos_command(argv: list[str], prog: str = "proclab trex demos") -> None:
    args = tyro.cli(DemosArgs, args=argv, prog=prog)
    n = record_demos(
        list(args.agents),
        args.out,
        args.num,
        args.split,
        runtime=args.runtime(),
        game=args.game,
        levels=args.levels,
        max_len=args.max_len,
        num_envs=args.num_envs,
        use_backgrounds=args.use_backgrounds,
        seed=args.seed,
    )
    print(f"recorded {n} {args.split} demos")
    print(f"demo store: {args.out}")


# -- trex train -------------------------------------------------------------------------------------
DESCRIPTION = """Learn a reward from demos ranked by return (T-REX) and measure it on demos from held-out levels.

--preset NAME      start from named defaults: {presets} (flags below override them; default batched)
--resume RUN_DIR   continue a stopped run exactly from its last epoch (only --max-epochs may change;
                   a finished run is left as it is unless --max-epochs asks for more)"""


def parse_run(argv: list[str], prog: str = "proclab trex train") -> tuple[TrexConfig, Path | None]:
    """``--preset NAME`` picks the defaults (batched, or parity: the seed's); any other flag overrides a field;
    ``--resume RUN_DIR`` continues a stopped run (only ``--max-epochs`` may change)."""
    return RunParser(
        prog=prog,
        flags=lambda rest, default, prog, description: tyro.cli(
            TrexConfig,
            args=rest,
            default=default,
            prog=prog,
            description=description,
            config=(tyro.conf.OmitArgPrefixes,),
        ),
        start=lambda chosen, rest: trex_preset(chosen["--preset"] or "batched"),
        saved=lambda data, run_dir: from_dict(TrexConfig, data),
        may_change="--max-epochs",
        end_step=lambda config: config.max_epochs,
        checkpoint=lambda run_dir: run_dir / PROGRESS,
        description=DESCRIPTION.format(presets=", ".join(TREX_PRESETS)),
    ).parse(argv)


def parse_args(argv: list[str], prog: str = "proclab trex train") -> TrexConfig:
    """The config of a new run (see :func:`parse_run`)."""
    return parse_run(argv, prog)[0]


def train_command(argv: list[str], prog: str = "proclab trex train") -> None:
    cfg, resume = parse_run(argv, prog)
    row = train_trex(cfg.demos, cfg, resume=resume).summary
    summary = cfg.summary or cfg.run_root / "trex" / "rm_infos.csv"
    append_summary(summary, [row])
    print(
        f"{row['env_name']}: {cfg.num_demos} demos, val acc {row['val_acc']:.3f}; test pair accuracy "
        f"{row['test_acc']:.3f} on progress-heuristic pairs, {row['test_acc_uniform']:.3f} on uniform-start pairs"
    )
    print(
        f"  on the same pairs, the clips' true returns: {row['gt_test_acc']:.3f} / {row['gt_test_acc_uniform']:.3f} "
        f"(not a ceiling: clip returns tie or disagree with their demos' ranking); a reward growing with "
        f"time alone: {row['progress_test_acc']:.3f} / {row['progress_test_acc_uniform']:.3f}"
    )
    print(
        f"held-out levels ({row['test_demos']} demos): Spearman {row['spearman']:.3f}, Pearson {row['pearson']:.3f}; "
        f"+1/step baseline: Spearman {row['baseline_spearman']:.3f}, Pearson {row['baseline_pearson']:.3f}"
    )
    print(f"summary row appended to {summary}")
    print(f"reward model: {row['run_dir']}")


# -- trex grid --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GridArgs(RuntimeConfig):
    """Run the T-REX grid (games x num-demos x seeds) in parallel; every run's summary row goes to one CSV."""

    data: Annotated[Path, DATA] = Path("demos")
    """Demo store (train and test demos of every game in the grid)."""
    games: tuple[str, ...] = ()
    """Games (default: every game in the demo store)."""
    num_demos: tuple[int, ...] = (12, 50, 100)
    """Numbers of training demos (the published study: 9 ... 1000)."""
    seeds: int = 5
    """Seeds per (game, num-demos) cell: --train.seed, --train.seed + 1, ..."""
    out: Path = Path("runs/trex/grid.csv")
    """CSV of summary rows (appended to)."""
    skip_done: bool = True
    """Skip cells (game, num-demos, seed) that already have a row in --out: rerunning an interrupted grid
    continues it (the rows' other settings are not compared: use a new --out for new settings)."""
    workers: int = 1
    """Runs at a time on this machine (1: one after another in this process); with --torch-threads 0 each
    computes on cores / workers threads (a Ray task: 1)."""
    ray_address: str | None = None
    """Run each cell as a Ray task on this cluster (e.g. auto, HOST:6379, ray://HOST:10001; default: $RAY_ADDRESS,
    else local processes)."""
    train: TrexConfig = field(default_factory=TrexConfig)
    """Settings of every run, from --preset; the grid sets their demo store, game, num-demos, seed and runtime
    (--data, --games, --num-demos, --train.seed + s, and --device, --precision, --channels-last,
    --torch-threads above)."""


SET_BY_GRID = {
    "--train.data": "--data",
    "--train.game": "--games",
    "--train.num-demos": "--num-demos",
    **{
        f"--train.{flag}": f"--{flag}"
        for flag in ("device", "precision", "channels-last", "no-channels-last", "torch-threads")
    },
}
"""``--train`` flags whose fields the grid sets for every run, and the grid's flag that sets them."""


def grid_command(argv: list[str], prog: str = "proclab trex grid") -> None:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", default="batched")
    known, rest = pre.parse_known_args(argv)
    for flag in (a.split("=", 1)[0] for a in rest):
        if flag in SET_BY_GRID:
            raise ProclabError(f"the grid sets {flag[2:]} of every run; give {SET_BY_GRID[flag]} instead")
    train = trex_preset(known.preset)
    runtime = asdict(settings_from(train, RuntimeConfig))  # a preset's (parity: fp32)
    description = (
        f"{GridArgs.__doc__}\n\n--preset NAME   every run starts from trex train's named defaults: "
        f"{', '.join(TREX_PRESETS)} (default batched; --train.FIELD overrides one)"
    )
    default = GridArgs(train=train, **runtime)
    args = tyro.cli(GridArgs, args=rest, default=default, prog=prog, description=description)
    skipped = len(finished_cells(args.out)) if args.skip_done else 0
    train = replace(args.train, demos=args.data, **asdict(settings_from(args, RuntimeConfig)))
    rows = run_grid(settings_from(args, GridSettings, train=train))
    print(f"{len(rows)} runs ({skipped} rows were already in {args.out}); summary rows in {args.out}")


# -- trex evaluate ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class EvaluateArgs(RuntimeConfig):
    """Does a learned reward rank demos of equal length by their return? Partial and binned Spearman. The
    predictions are computed with the runtime flags: to measure again what a 'trex train' summary row says,
    give the run's --precision (its config.json holds it; --preset parity runs: fp32)."""

    reward_model: Annotated[tuple[Path, ...], REWARD_MODELS]
    """Reward models: 'proclab trex train' run or checkpoint directories; several: one report each."""
    data: Annotated[Path | None, DATA] = None
    """Demo store (default: the one the first reward model was trained on)."""
    split: str = "test"
    """Demos of this split: test (held-out levels) or train."""
    length_bins: int = 10
    """Equal-count length bins for the binned Spearman."""
    min_bin: int = 5
    """Bins with fewer demos are left out of the binned Spearman."""
    bootstrap: int = 1000
    """Bootstrap resamples of the demos for the 95% CIs (0: none)."""
    seed: int = 0
    """Seed of the bootstrap resamples."""
    out: Path | None = None
    """Also write the reports as JSON here."""


def format_report(r: dict) -> str:
    def ci(key: str) -> str:
        return f"{r[key]:+.3f} [{r[key + '_lo']:+.3f}, {r[key + '_hi']:+.3f}]"

    return "\n".join(
        [
            f"{r['reward_model']}: {r['control_demos']} {r['game']} {r['split']} demos, 95% bootstrap CIs",
            f"  Spearman (predicted vs true return)      {ci('spearman')}",
            f"  +1/step baseline (length vs return)      {ci('baseline_spearman')}",
            f"  Spearman minus baseline (paired)         {ci('spearman_gain')}",
            f"  partial Spearman given length            {ci('partial_spearman')}",
            f"  Spearman within {r['length_bins']} length bins          {ci('binned_spearman')}",
            f"  baseline within the same bins            {ci('baseline_binned_spearman')}",
            f"  within bins minus baseline (paired)      {ci('binned_gain')}",
            f"  partial given length within checkpoint   {ci('checkpoint_partial_spearman')}",
        ]
    )


def evaluate_command(argv: list[str], prog: str = "proclab trex evaluate") -> None:
    args = tyro.cli(EvaluateArgs, args=argv, prog=prog)
    if args.out is not None and args.out.exists():
        raise ProclabError(f"{str(args.out)!r} exists; give another --out (reports are never overwritten)")
    rt = args.runtime()
    reports = []
    for path in args.reward_model:
        evaluation = evaluate_trex(
            RewardModel.load(path, runtime=rt),
            demos=args.data,
            settings=settings_from(args, TrexEvaluationSettings),
        )
        reports.append(evaluation.report())
        print(format_report(reports[-1]))
    if args.out is not None:
        print(f"reports: {write_json(args.out, reports, 'T-REX control report')}")


# -- trex plot --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlotArgs(RuntimeConfig):
    """Plot T-REX results: correlation bars from a summary CSV, and/or a reward model's predictions (computed
    with the runtime flags)."""

    summary: Path | None = None
    """Grid CSV or rm_infos.csv: bars of Spearman/Pearson per number of demos, baseline dashed."""
    reward_model: Annotated[Path | None, REWARD_MODEL] = None
    """A 'proclab trex train' run or checkpoint directory: cumulative true vs predicted reward on sampled
    test demos."""
    data: Annotated[Path | None, DATA] = None
    """Demo store for the predictions (default: the one the reward model was trained on)."""
    panels: int = 6
    """Test demos in the prediction plot."""
    seed: int = 0
    """Seed of the demo sample."""
    out: Path = Path("trex-plots")
    """Output directory."""


def plot_command(argv: list[str], prog: str = "proclab trex plot") -> None:
    args = tyro.cli(PlotArgs, args=argv, prog=prog)
    if args.summary is None and args.reward_model is None:
        raise ProclabError(
            "give --summary CSV (correlation bars) and/or --reward-model REWARD_MODEL (reward predictions)"
        )
    paths = []
    if args.summary is not None:
        paths += plot_correlations(read_rows(args.summary), args.out)
    if args.reward_model is not None:
        paths.append(
            plot_predictions(
                args.reward_model, args.out, args.runtime(), args.data, args.panels, seed=args.seed
            )
        )
    for p in paths:
        print(f"plot: {p}")


# -- trex demo-video --------------------------------------------------------------------------------
@dataclass(frozen=True)
class DemoVideoArgs(RuntimeConfig):
    """Write one T-REX demo as an mp4 with action arrows and reward captions."""

    demo_id: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="DEMO_ID")]
    """Demo id, e.g. 1_203_931_872 (see 'proclab data info' or the demo store's episodes)."""
    data: Annotated[Path, DATA] = Path("demos")
    """Demo store written by 'proclab trex demos'."""
    game: str | None = None
    """Game of the demo (needed only if the store holds several games)."""
    reward_model: Annotated[Path | None, REWARD_MODEL] = None
    """Also caption each frame with the reward of this reward model (a 'proclab trex train' run or checkpoint
    directory), computed with the runtime flags."""
    out: Path | None = None
    """Output mp4 (default: demo_<ID>.mp4)."""
    fps: float = 15
    """Frames per second."""
    scale: int = 6
    """Upscaling of the 64x64 frames."""


def demo_video_command(argv: list[str], prog: str = "proclab trex demo-video") -> None:
    args = tyro.cli(DemoVideoArgs, args=argv, prog=prog)
    out = args.out or Path(f"demo_{args.demo_id}.mp4")
    game, steps, ret = write_demo_video(
        args.data,
        args.demo_id,
        out,
        game=args.game,
        reward_model=args.reward_model,
        runtime=settings_from(args, RuntimeConfig),
        fps=args.fps,
        scale=args.scale,
    )
    print(f"{game} demo {args.demo_id}: {steps} steps, return {ret:g}")
    print(f"video: {out}")
