"""``proclab wm evaluate``: :mod:`.evaluation` on the command line, one JSON and one plot, and a strip.

``OUT/evaluation.json`` is :meth:`~.evaluation.WorldModelEvaluation.summary`, ``OUT/evaluation.png`` its plot.
**Prediction strip** (``--strip-windows N``): ``OUT/strip.png``, N windows as rows of true, teacher-forced,
imagined (open loop) and closed-loop (greedy) frames, steps ``0 .. horizon``; with ``--strip-near KIND`` only
windows where that kind is near the agent at the start (rare objects drawn on purpose, not by luck).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from proclab.envs import EnvConfig
from proclab.errors import ProclabError
from proclab.io.arguments import DATA, WM
from proclab.io.configs import from_dict
from proclab.io.files import write_json
from proclab.run.runtime import RuntimeConfig
from proclab.store import EpisodeStore
from proclab.worldmodel.checkpoint import TrainedWorldModel
from proclab.worldmodel.evaluation import (
    DRIFT_MODES,
    REWARD_MODES,
    EvaluationSettings,
    evaluate_world_model,
    plot_evaluation,
)
from proclab.worldmodel.frame_error import prediction_strip


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


def evaluate(args: EvaluateArgs, progress: bool = True) -> dict:
    """Run the evaluation; write ``out/evaluation.json``, ``out/evaluation.png`` (and with ``strip_windows``,
    ``out/strip.png``); return the JSON data."""
    args.check()
    world = TrainedWorldModel.load(args.wm, runtime=args.runtime())
    result = evaluate_world_model(world, data=args.data, settings=args, progress=progress).summary()
    write_json(args.out / "evaluation.json", result, "world-model evaluation", indent=1)
    plot_evaluation(result, args.out / "evaluation.png")
    if args.strip_windows:
        near = None if args.strip_near is None else (args.strip_near, args.near_radius)
        prediction_strip(
            world.model,
            world.agent,
            EpisodeStore(args.data),
            world.reward_field,
            world.runtime,
            args.out / "strip.png",
            steps=args.horizon,
            windows=args.strip_windows,
            seed=args.seed,
            near=near,
            env_config=from_dict(EnvConfig, world.checkpoint.meta["agent_env"]),
        )
    return result


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


def main(argv: list[str], prog: str = "proclab wm evaluate") -> None:
    args = tyro.cli(EvaluateArgs, args=argv, prog=prog)
    result = evaluate(args)
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
