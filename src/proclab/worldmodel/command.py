"""The ``proclab wm`` commands: ``train`` (:mod:`.trainer`, with ``--preset``, flags, ``--resume``, torchrun),
``sample`` (:mod:`.sample`), ``loss-over-time`` (:mod:`.loss_over_time`) and ``evaluate`` (:mod:`.evaluation`:
``OUT/evaluation.json``, its plot ``OUT/evaluation.png`` and, with ``--strip-windows N``, the prediction strip
``OUT/strip.png``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from proclab.errors import ProclabError
from proclab.io.arguments import AGENT, DATA, WM, settings_from
from proclab.run.distributed import train_on_ranks
from proclab.run.parser import RunParser
from proclab.run.runtime import RuntimeConfig
from proclab.store import EpisodeStore
from proclab.worldmodel.checkpoint import TrainedWorldModel
from proclab.worldmodel.config import WM_SIZES, WMTrainConfig, saved_train_config, wm_size
from proclab.worldmodel.evaluation import (
    DRIFT_MODES,
    REWARD_MODES,
    EvaluationSettings,
    StripSettings,
    evaluate_into,
)
from proclab.worldmodel.loss_over_time import LossOverTimeSettings, loss_over_time
from proclab.worldmodel.sample import SamplingSettings, sample_rollouts
from proclab.worldmodel.trainer import WMTrainer, new_run_dir

# -- wm train ---------------------------------------------------------------------------------------
DESCRIPTION = """Train the generative agent-environment model (interpreting-rl-behavior's Gen-2) on an episode
store.

--preset NAME      start from a named preset: {presets} (flags below override it; default paper)
--resume RUN_DIR   continue a stopped run exactly (only --total-updates and --time-limit may change; a
                   finished run is left as it is unless --total-updates asks for more)
--time-limit S     stop after S seconds of this session with a checkpoint; --resume continues it and
                   each resumed session gets the saved limit again (or a new --time-limit), so sessions
                   add up to one run, bit-identical to an uninterrupted one"""


def parse_args(argv: list[str], prog: str = "proclab wm train") -> tuple[WMTrainConfig, Path | None]:
    """``--preset NAME`` picks the defaults, other flags override fields; ``--resume RUN_DIR`` continues."""
    return RunParser(
        prog=prog,
        flags=lambda rest, default, prog, description: tyro.cli(
            WMTrainConfig, args=rest, default=default, prog=prog, description=description
        ),
        start=lambda chosen, rest: wm_size(chosen["--preset"]) if chosen["--preset"] else WMTrainConfig(),
        saved=lambda data, run_dir: saved_train_config(data),
        may_change="--total-updates",
        session_flags=("--time-limit",),
        end_step=lambda config: config.total_updates,
        description=DESCRIPTION.format(presets=", ".join(WM_SIZES)),
    ).parse(argv)


def _report(trainer: WMTrainer, out: Path) -> None:
    last = trainer.logger.rows[-1] if trainer.logger and trainer.logger.rows else {}
    print(
        f"trained {trainer.updates:,} updates in {trainer.train_seconds / 3600:.2f} h of training (all sessions); "
        f"last logged loss {float(last.get('losses/total', math.nan)):.2f}"
    )
    print(f"run directory: {out}")


def train_command(argv: list[str], prog: str = "proclab wm train") -> None:
    config, resume_dir = parse_args(argv, prog)
    train_on_ranks(
        WMTrainer, config, resume_dir, lambda cfg: new_run_dir(cfg, EpisodeStore(cfg.data)), _report
    )


# -- wm sample --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SampleArgs(RuntimeConfig):
    """Simulate rollouts of the agent in a trained world model (closed loop) into an episode store. Samples
    for saliency through the simulator need --precision fp32 (analyze saliency re-simulates them in fp32 and
    checks that it reproduces them)."""

    wm: Annotated[Path, tyro.conf.Positional, WM]
    """The world model: a 'proclab wm train' run or checkpoint directory (a run: its latest checkpoint)."""
    out: Annotated[Path, tyro.conf.arg(metavar="SAMPLES")] = Path("samples")
    """Episode store to write (created if missing); videos go to SAMPLES/videos/."""
    n: int = 100
    """Number of simulated rollouts."""
    init: str = "informed"
    """informed (encode real initial frames) or random (a random unit bottleneck vector)."""
    steps: int = 10
    """Steps per rollout (the seed's saliency samples: 10)."""
    data: Annotated[Path | None, DATA] = None
    """Store whose frames inform the initial states (default: the one the model was trained on)."""
    videos: int = 8
    """Write mp4s of the first K rollouts."""
    agent: Annotated[str, AGENT] = "trained"
    """Agent in the loop: trained (the model's own), untrained, always-right (or another direction), or
    another agent (a proclab run or checkpoint directory)."""
    modal: bool = True
    """Take the argmax of every categorical (deterministic rollouts); --no-modal samples them."""
    greedy: bool = True
    """The agent takes its most likely action; --no-greedy samples its policy."""
    batch_size: int = 64
    """Rollouts simulated at once."""
    seed: int = 0
    """Seed of the initial frames' choice, random vectors and samples."""


def sample_command(argv: list[str], prog: str = "proclab wm sample") -> None:
    args = tyro.cli(SampleArgs, args=argv, prog=prog)
    out = sample_rollouts(
        args.wm,
        args.out,
        settings_from(args, SamplingSettings),
        settings_from(args, RuntimeConfig),
        data=args.data,
    )
    store = EpisodeStore(out)
    print(f"simulated {args.n} rollouts of {args.steps} steps ({args.init} init, agent {args.agent})")
    print(f"episode store: {out} ({store.num_episodes} episodes in all); videos: {out / 'videos'}")


# -- wm loss-over-time ------------------------------------------------------------------------------
@dataclass(frozen=True)
class LossOverTimeArgs(RuntimeConfig):
    """Per-simulation-step error of each predicted quantity, imagination vs data (JSON + plot)."""

    wm: Annotated[Path, tyro.conf.Positional, WM]
    """The world model: a 'proclab wm train' run or checkpoint directory (a run: its latest checkpoint)."""
    data: Annotated[Path | None, DATA] = None
    """Episode store to compare with (default: the one the model was trained on; a held-out one is better)."""
    out: Path = Path("loss_over_time")
    """Directory for loss_over_time.json and loss_over_time.png."""
    batches: int = 16
    """Batches of windows (the seed: 16)."""
    batch_size: int = 32
    """Windows per batch."""
    steps: int | None = None
    """Simulated steps (default: the model's num_sim_steps)."""
    actions: str = "true"
    """Actions driving the environment: true (recorded, the seed's setting) or agent (closed loop)."""
    modal: bool = True
    """Take the argmax of each categorical (--no-modal samples the prior)."""
    seed: int = 0
    """Seed of the windows' choice and of the samples."""


def loss_over_time_command(argv: list[str], prog: str = "proclab wm loss-over-time") -> None:
    args = tyro.cli(LossOverTimeArgs, args=argv, prog=prog)
    result = loss_over_time(
        args.wm,
        args.out,
        settings_from(args, LossOverTimeSettings),
        settings_from(args, RuntimeConfig),
        data=args.data,
    )
    first_last = {k: (q["mean"][0], q["mean"][-1]) for k, q in result["quantities"].items()}
    for name, (a, b) in first_last.items():
        print(
            f"{name:>16}: step 0 {a if a is None else f'{a:.4g}'}  ->  step {result['steps'] - 1} "
            f"{b if b is None else f'{b:.4g}'}"
        )
    print(f"loss over time: {args.out / 'loss_over_time.json'} and {args.out / 'loss_over_time.png'}")


# -- wm evaluate ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EvaluateArgs(EvaluationSettings, RuntimeConfig):
    """Judge a world model on held-out episodes: frame error per step in three modes against two baselines, a
    changed-pixel error, the dream's rewards against reality, the drift of the agent's dreamed states, and a
    strip of predicted frames. The numbers of docs/worldmodel.md were measured with --precision fp32."""

    wm: Annotated[Path, tyro.conf.Positional, WM]
    """The world model: a 'proclab wm train' run or checkpoint directory (a run: its latest checkpoint)."""
    data: Annotated[Path, DATA]
    """Episode store of held-out episodes (levels the model never trained on: proclab record --split)."""
    out: Path = Path("wm_evaluation")
    """Directory for evaluation.json and evaluation.png (and strip.png with --strip-windows)."""
    strip_windows: int = 0
    """Also draw this many windows (a seeded pick) as rows of true | teacher-forced | imagined (open loop) |
    closed-loop (greedy) frames, steps 0 .. --horizon, into OUT/strip.png (0: no strip)."""
    strip_near: str | None = None
    """Draw only windows with this kind within --near-radius of the agent at their start (coinrun: saw,
    coin, crate, enemy, lava; read from the replayed game state: needs the store's first game states)."""
    near_radius: float = 3.0
    """World units (on both axes, box to box) within which --strip-near's kind counts as near."""
    overwrite: bool = False
    """Replace an existing evaluation in --out."""

    def check(self) -> None:
        super().check()
        if self.strip_windows < 0:
            raise ProclabError(f"--strip-windows must be >= 0, got {self.strip_windows}")
        if self.strip_near is not None and self.strip_windows == 0:
            raise ProclabError("--strip-near picks the windows of the strip; give --strip-windows N too")
        if (self.out / "evaluation.json").exists() and not self.overwrite:
            raise ProclabError(
                f"{str(self.out / 'evaluation.json')!r} exists; choose another --out or --overwrite"
            )


def _fmt(cell: dict | None) -> str:
    if cell is None or cell["mean"] is None:
        return "-"
    ci = "" if cell["ci95"] is None else " [{:+.4f}, {:+.4f}]".format(*cell["ci95"])
    return f"{cell['mean']:+.4f}{ci}"


def _auc(cell: dict) -> str:
    if cell["auc"] is None:
        return f"- ({cell['positives']} positives, {cell['negatives']} negatives)"
    ci = "" if cell["ci95"] is None else " [{:.3f}, {:.3f}]".format(*cell["ci95"])
    return f"{cell['auc']:.3f}{ci}"


def evaluate_command(argv: list[str], prog: str = "proclab wm evaluate") -> None:
    args = tyro.cli(EvaluateArgs, args=argv, prog=prog)
    args.check()
    world = TrainedWorldModel.load(args.wm, runtime=args.runtime())
    strip = (
        StripSettings(args.strip_windows, args.strip_near, args.near_radius) if args.strip_windows else None
    )
    result = evaluate_into(args.out, world, args.data, settings_from(args, EvaluationSettings), strip=strip)
    steps = result["mse"]["steps"]
    shown = sorted({1, min(5, steps[-1]), steps[-1]})
    for metric in ("mse", "changed_pixels"):
        for name, cells in result[metric]["mean"].items():
            print(f"{metric:>14} {name:>18}: " + "  ".join(f"k={k} {_fmt(cells[k - 1])}" for k in shown))
        for name, cells in result[metric]["minus_better_baseline"].items():
            print(
                f"{metric:>14} {name + ' - best':>25}: "
                + "  ".join(f"k={k} {_fmt(cells[k - 1])}" for k in shown)
            )
        real = result[metric]["closed_loop_minus_real_game"]
        if real is not None:
            print(
                f"{metric:>14} {'closed loop - real game':>25}: "
                + "  ".join(f"k={k} {_fmt(real[k - 1])}" for k in shown)
            )
    same = result["closed_loop_same_actions"]
    if same is not None:
        print(
            "closed loop acting as in the real game at every step so far: "
            + "  ".join(f"k={k} {_fmt(same[k])}" for k in sorted({0, min(4, len(same) - 1), len(same) - 1}))
        )
    psnr = result["psnr"]
    print(
        "controllability (open-loop PSNR, recorded minus random actions, dB): "
        + "  ".join(f"k={k} {_fmt(psnr['controllability'][k - 1])}" for k in shown)
    )
    reward = result["reward"]
    print(
        f"reward within {reward['within']}: {reward['positives']} of {reward['windows']} windows, "
        f"real reward there {_fmt(reward['real_reward_in_positives'])}"
    )
    for name in (*REWARD_MODES, "teacher-forced, no end within", "value at start"):
        r = reward[name]
        if r is None:
            continue
        line = f"reward AUC ({name}): {_auc(r)}"
        if "mean_in_positives" in r:
            line += f", dreamed reward in positives {_fmt(r['mean_in_positives'])}"
        print(line)
    if result["drift"] is not None:
        for name in DRIFT_MODES:
            print(f"agent-state drift ({name}): median ratio {result['drift'][name]['median_ratio']:.2f}")
    if args.strip_windows:
        print(f"prediction strip: {args.out / 'strip.png'}")
    print(
        f"evaluation of {result['windows']} windows ({result['levels']} levels): {args.out / 'evaluation.json'}"
    )
