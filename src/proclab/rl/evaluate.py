"""``proclab eval``: returns and normalised scores of a checkpoint on chosen level splits.

Unbiased by construction: each env slot has a fixed quota of episodes decided before the run
(``episodes`` split as evenly as possible over the slots of a game) and only its first
``quota`` *complete* episodes count. Stopping at "the first N episodes to finish" instead
would over-sample short episodes, which are often failures (or successes) in Procgen.

The agent keeps its memory across a slot's episodes and resets it on episode starts, as in
training. ``--greedy`` takes the argmax action (the modern-srwm test protocol); the default
samples, as during training.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import tyro

from proclab.envs import (
    EnvConfig,
    ProcgenVecEnv,
    check_disjoint,
    mean_normalized_score,
    normalized_score,
    parse_split,
)
from proclab.errors import ProclabError
from proclab.rl.rollout import Actor
from proclab.rl.runtime import Runtime, make_runtime


@dataclass
class SplitResult:
    split: str
    game: str
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    completed: list[bool] = field(default_factory=list)

    def summary(self, mode: str) -> dict:
        r = np.asarray(self.returns, dtype=np.float64)
        return {
            "split": self.split, "game": self.game, "episodes": int(r.size),
            "return_mean": float(r.mean()), "return_std": float(r.std()),
            "return_sem": float(r.std(ddof=1) / np.sqrt(r.size)) if r.size > 1 else 0.0,
            "length_mean": float(np.mean(self.lengths)), "level_complete_rate": float(np.mean(self.completed)),
            "normalized_score": normalized_score(self.game, float(r.mean()), mode),
        }  # fmt: skip


def quotas(episodes: int, slots: int) -> np.ndarray:
    """Episodes per slot, as even as possible, fixed in advance."""
    q = np.full(slots, episodes // slots)
    q[: episodes % slots] += 1
    return q


def evaluate(
    agent,
    env_config: EnvConfig,
    split: str,
    episodes: int,
    runtime: Runtime,
    *,
    greedy: bool = False,
    envs_per_game: int = 16,
    seed: int = 0,
    progress=None,
) -> dict[str, SplitResult]:
    """Play ``episodes`` complete episodes per game on ``split``; results per game."""
    games = env_config.games()
    per_game = max(1, min(envs_per_game, episodes))
    env = ProcgenVecEnv(replace(env_config, num_envs=per_game * len(games)), seed=seed, split=split)
    try:
        return evaluate_env(agent, env, episodes, runtime, greedy=greedy, split=str(split), progress=progress)
    finally:
        env.close()


def evaluate_env(agent, env, episodes: int, runtime: Runtime, *, greedy: bool = False, split: str = "",
                 progress=None) -> dict[str, SplitResult]:  # fmt: skip
    """Evaluate on an existing vector env (``games``, ``game_index``, ``step`` as ProcgenVecEnv)."""
    games = env.games
    slot_quota = np.empty(env.num_envs, np.int64)
    for g in range(len(games)):
        slot_quota[env.game_index == g] = quotas(episodes, int((env.game_index == g).sum()))
    results = {game: SplitResult(split=split, game=game) for game in games}
    counts = np.zeros(env.num_envs, np.int64)
    actor = Actor(env, agent, runtime)
    while (counts < slot_quota).any():
        active = counts < slot_quota
        rows = None if active.all() else torch.from_numpy(np.flatnonzero(active)).to(runtime.device)
        _, action, _, state = actor.act(greedy=greedy, rows=rows)  # envs with a full quota idle
        _, _, info = actor.env_step(action, state)
        ep = info["episode"]
        for i in np.flatnonzero(ep["done"] & active):
            res = results[games[env.game_index[i]]]
            res.returns.append(float(ep["return"][i]))
            res.lengths.append(int(ep["length"][i]))
            res.completed.append(bool(ep["level_complete"][i]))
            counts[i] += 1
            if progress is not None:
                progress()
    return results


def results_table(rows: list[dict], mode: str) -> dict:
    """Rows per (split, game) plus the per-split aggregate (mean normalised score over games)."""
    aggregate = {}
    for split in dict.fromkeys(r["split"] for r in rows):
        means = {r["game"]: r["return_mean"] for r in rows if r["split"] == split}
        aggregate[split] = {"games": len(means), "mean_normalized_score": mean_normalized_score(means, mode)}
    return {"mode": mode, "rows": rows, "aggregate": aggregate}


# -- command line --------------------------------------------------------------------------------
@dataclass(frozen=True)
class EvalArgs:
    """Evaluate a checkpoint: mean/std return and normalised score per level split (and per game)."""

    checkpoint: tyro.conf.Positional[Path]
    """Checkpoint directory, or a run directory (its latest checkpoint)."""
    split: tyro.conf.UseAppendAction[tuple[str, ...]] = ()
    """Level split to evaluate on (named or START:NUM); repeat for several. Default: train and test1."""
    episodes: int = 100
    """Complete episodes per split and game."""
    greedy: bool = False
    """Take the most likely action instead of sampling."""
    envs_per_game: int = 16
    """Parallel envs per game (each runs a fixed quota of episodes)."""
    seed: int = 0
    """Seed of the evaluation envs and action sampling."""
    json: bool = False
    """Print the results as JSON."""
    out: Path | None = None
    """Also write the JSON results to this file."""
    device: str = "auto"
    """Torch device."""
    precision: str = "auto"
    """bf16, fp32 or auto."""


def main(argv: list[str], prog: str = "proclab eval") -> None:
    run(tyro.cli(EvalArgs, args=argv, prog=prog))


def run(args: EvalArgs) -> dict:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from proclab.rl.agents import load_agent

    if args.episodes < 1:
        raise ProclabError(f"--episodes must be >= 1, got {args.episodes}")
    rt = make_runtime(args.device, args.precision)
    torch.manual_seed(args.seed)
    agent, env_config, ckpt = load_agent(args.checkpoint, rt)
    split_names = args.split or ("train", "test1")
    splits = [parse_split(s) for s in split_names]
    train_split = parse_split(env_config.split)
    for s in splits:  # warn, do not refuse: evaluating on the training levels is legitimate
        if s.bounded and train_split.bounded and s != train_split and s.overlaps(train_split):
            try:
                check_disjoint(train_split, s)
            except ProclabError as err:
                Console(stderr=True).print(f"[yellow]note:[/yellow] {err}")
    games = env_config.games()
    rows = []
    console = Console(stderr=args.json)
    with Progress(console=console, transient=True) as bar:
        for split in split_names:
            task = bar.add_task(f"eval {split}", total=args.episodes * len(games))
            res = evaluate(agent, env_config, split, args.episodes, rt, greedy=args.greedy,
                           envs_per_game=args.envs_per_game, seed=args.seed,
                           progress=lambda t=task: bar.advance(t))  # fmt: skip
            rows.extend(r.summary(env_config.mode) for r in res.values())
    table = results_table(rows, env_config.mode)
    table.update(checkpoint=str(ckpt.path), step=ckpt.step, greedy=args.greedy)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(table, indent=2))
    if args.json:
        print(json.dumps(table, indent=2))
        return table
    t = Table(title=f"{ckpt.path} (step {ckpt.step:,}, {'greedy' if args.greedy else 'sampled'} actions)")
    for col in ("split", "game", "episodes", "return", "length", "completed", "normalised"):
        t.add_column(col, justify="left" if col in ("split", "game") else "right")
    for r in rows:
        t.add_row(r["split"], r["game"], str(r["episodes"]), f"{r['return_mean']:.2f} ± {r['return_std']:.2f}",
                  f"{r['length_mean']:.0f}", f"{r['level_complete_rate']:.2f}", f"{r['normalized_score']:.3f}")  # fmt: skip
    if len(games) > 1:
        for split, agg in table["aggregate"].items():
            t.add_row(split, "[bold]mean", "", "", "", "", f"[bold]{agg['mean_normalized_score']:.3f}")
    console.print(t)
    if args.out is not None:
        console.print(f"results written to {args.out}")
    return table
