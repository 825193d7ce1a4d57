"""``proclab quickstart``: the whole pipeline, small enough for a laptop CPU.

Each stage is the real command at toy scale, writing under ``--out``:

1. ``train``  - PPO on an easy Procgen game (the ``tiny`` preset) -> ``runs/``
2. ``eval``   - returns on the training levels and on held-out test levels -> ``eval.json``
3. ``render`` - a video of what the agent sees, with its actions and values -> ``agent.mp4``
4. ``plot``   - the training curves -> ``curves.png``
5. ``record`` - a few episodes with the agent's internals -> ``episodes/<run>/`` (an episode store)
6. ``wm train`` - the small world model, briefly, on those episodes -> ``runs/wm/``
7. ``wm sample`` - simulated rollouts of the agent inside it -> ``samples/`` (+ videos)

A page ``index.html`` shows the numbers, curves and videos together (:mod:`proclab.report`).
Re-running with the same ``--out`` trains a new run; the other stages read the newest one.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

import tyro


@dataclass(frozen=True)
class QuickstartArgs:
    """Run the proclab pipeline end to end at toy scale and write everything under --out."""

    out: Path = Path("proclab-demo")
    """Output directory (created if missing)."""
    game: str = "starpilot"
    """Procgen game (easy mode)."""
    train_steps: int = 200_000
    """PPO environment steps (about 5 minutes on 2 CPU cores with bf16, twice that without)."""
    eval_episodes: int = 20
    """Evaluation episodes per level split."""
    render_steps: int = 2000
    """Most steps shown in the video (two episodes at most)."""
    record_episodes: int = 8
    """Episodes recorded into the episode store."""
    wm_updates: int = 150
    """World-model training updates (small size: enough for each level's colours and layout, about a
    minute; sharp sprites need thousands)."""
    wm_samples: int = 4
    """Simulated rollouts sampled from the world model (each with a video)."""
    seed: int = 1
    """Seed of levels, weights and actions."""


def main(argv: list[str], prog: str = "proclab quickstart") -> None:
    args = tyro.cli(QuickstartArgs, args=argv, prog=prog)
    run(args)


def run(args: QuickstartArgs) -> Path:
    from rich.console import Console

    from proclab.config import preset
    from proclab.data.record import RecordArgs
    from proclab.data.record import run as run_record
    from proclab.envs import check_game
    from proclab.io.plots import plot_runs
    from proclab.report import write_report
    from proclab.rl.evaluate import EvalArgs
    from proclab.rl.evaluate import run as run_eval
    from proclab.rl.ppo_train import Trainer
    from proclab.rl.render import RenderArgs, render
    from proclab.worldmodel import SampleArgs, sample_rollouts, train_world_model, wm_size

    console = Console()
    check_game(args.game, "easy")
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()

    console.rule(f"[bold]1/7 train[/bold]: PPO on {args.game} (easy), {args.train_steps:,} steps")
    cfg = preset("tiny")
    cfg = replace(
        cfg,
        env=replace(cfg.env, game=(args.game,)),
        ppo=replace(cfg.ppo, total_steps=args.train_steps),
        run_root=args.out / "runs",
        seed=args.seed,
        name="quickstart",
    )
    run_dir = Trainer(cfg).train()
    console.print(f"run directory: {run_dir}")

    console.rule("[bold]2/7 eval[/bold]: training levels vs held-out test levels")
    table = run_eval(EvalArgs(checkpoint=run_dir, split=("train", "test1"), episodes=args.eval_episodes,
                              seed=args.seed, out=args.out / "eval.json"))  # fmt: skip

    console.rule("[bold]3/7 render[/bold]: what the agent sees")
    video, returns = render(RenderArgs(checkpoint=run_dir, out=args.out / "agent.mp4", episodes=2,
                                        max_steps=args.render_steps, seed=args.seed))  # fmt: skip
    console.print(f"video: {video} (episode returns {', '.join(f'{r:g}' for r in returns)})")

    console.rule("[bold]4/7 plot[/bold]: training curves")
    curves = plot_runs([run_dir], args.out / "curves.png")
    console.print(f"curves: {curves}")

    console.rule("[bold]5/7 record[/bold]: episodes with the agent's internals")
    store, _ = run_record(RecordArgs(checkpoint=run_dir, out=args.out / "episodes" / run_dir.name,
                                     episodes=args.record_episodes, seed=args.seed))  # fmt: skip
    console.print(f"episode store: {store} (see proclab data info {store})")

    console.rule(f"[bold]6/7 wm train[/bold]: the agent-environment simulator, {args.wm_updates} updates")
    wm_cfg = replace(wm_size("small"), data=Path(store), total_updates=args.wm_updates, run_root=args.out / "runs",
                     name="quickstart", seed=args.seed, num_workers=0, video_every=0)  # fmt: skip
    wm_run = train_world_model(wm_cfg)
    console.print(f"world model: {wm_run}")

    console.rule("[bold]7/7 wm sample[/bold]: the agent dreaming")
    samples = sample_rollouts(SampleArgs(checkpoint=wm_run, out=args.out / "samples", n=args.wm_samples,
                                         videos=args.wm_samples, seed=args.seed))  # fmt: skip
    console.print(f"simulated rollouts: {samples} (videos in {Path(samples) / 'videos'})")

    summary = {
        "game": args.game,
        "train_steps": args.train_steps,
        "run_dir": str(run_dir),
        "episodes": str(store),
        "world_model": str(wm_run),
        "samples": str(samples),
        "eval": {r["split"]: r["return_mean"] for r in table["rows"]},
        "minutes": round((time.time() - started) / 60, 1),
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    page = write_report(args.out, f"proclab quickstart: {args.game}", summary, table)
    console.rule()
    console.print(f"report: [bold]{page}[/bold]")
    console.print(f"done in {summary['minutes']} min; outputs in [bold]{args.out.resolve()}[/bold]")
    return args.out
