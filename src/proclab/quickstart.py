"""``proclab quickstart``: the whole pipeline, small enough for a laptop CPU.

Today it plays a real Procgen game with a uniformly random policy, writes what the agent sees
to an mp4 and prints per-episode statistics. Each later layer (training, evaluation,
recording, the world model, T-REX) adds its stage here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro


@dataclass(frozen=True)
class QuickstartArgs:
    """Run the proclab pipeline end to end at toy scale and write everything under --out."""

    out: Path = Path("proclab-demo")
    """Output directory (created if missing)."""
    game: str = "coinrun"
    """Procgen game to play."""
    num_envs: int = 8
    """Parallel environments for the rollout."""
    steps: int = 400
    """Environment steps per env for the random-agent rollout."""
    seed: int = 0
    """Seed for levels and actions."""


def main(argv: list[str], prog: str = "proclab quickstart") -> None:
    args = tyro.cli(QuickstartArgs, args=argv, prog=prog)
    from rich.console import Console
    from rich.progress import track
    from rich.table import Table

    from proclab.envs import EnvConfig, EpisodeLog, ProcgenVecEnv
    from proclab.io.video import write_video

    console = Console()
    config = EnvConfig(game=(args.game,), num_envs=args.num_envs)
    env = ProcgenVecEnv(config, seed=args.seed)
    log = EpisodeLog(env.games, config.mode, window=10_000)
    rng = np.random.default_rng(args.seed)
    obs, _ = env.reset()
    frames, actions = [obs[0].copy()], []
    for _ in track(range(args.steps), description=f"random agent on {args.game}", console=console):
        action = rng.integers(0, 15, env.num_envs)
        obs, _, _, _, info = env.step(action)
        log.add(info, env.game_index)
        actions.append(int(action[0]))
        frames.append(obs[0].copy())
    env.close()
    actions.append(4)  # the last frame has no action yet; show a no-op ring
    args.out.mkdir(parents=True, exist_ok=True)
    video = write_video(args.out / "random_agent.mp4", np.stack(frames), fps=15, scale=4, actions=actions)

    stats = log.summary()
    table = Table(title=f"random agent, {args.game} ({config.mode}, levels {env.split.label()})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("episodes finished", str(log.total))
    for key in ("return_mean", "return_std", "length_mean", "level_complete_rate", "normalized_score"):
        if key in stats:
            table.add_row(key, f"{stats[key]:.3f}")
    console.print(table)
    console.print(f"video of env 0: [bold]{video}[/bold]")
    console.print(f"outputs in {args.out.resolve()}")
