"""Returns and normalised scores of an agent on chosen level splits (``proclab eval``).

Unbiased by construction: each env slot has a fixed quota of episodes decided before the run
(``episodes`` split as evenly as possible over the slots of a game) and only its first
``quota`` *complete* episodes count. Stopping at "the first N episodes to finish" instead
would over-sample short episodes, which are often failures (or successes) in Procgen.

The agent keeps its memory across a slot's episodes and resets it on episode starts, as in
training. ``--greedy`` takes the argmax action (the modern-srwm test protocol); the default
samples, as during training. ``--preset srwm`` is that seed's whole test protocol: greedy,
200 episodes per game on the training levels [0, 200) and the test splits starting at 1000,
1200 and 1400, shown as the paper reports it (one row per game, normalised scores x 100, and
their mean over games per split). ``--reset-every 50`` re-initialises the agent's memory every 50
steps, as the seed's ``--test_no_carry_sr`` ablation did; ``--score-table`` picks the constants
that normalise modes Procgen publishes none for (memory, extreme, exploration; see
:mod:`proclab.envs.scores`).

``--goals`` adds, for CoinRun and Maze, how many episodes reached each of the game's two goals (CoinRun's
coin and the level's end, Maze's cheese and the maze's top-right corner; :mod:`proclab.envs.state.goals`),
with exact 95 % intervals: read from the game state after every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from proclab.envs import (
    HELD_OUT,
    EnvConfig,
    ProcgenVecEnv,
    agent_split,
    check_disjoint,
    mean_normalized_score,
    normalized_score,
    parse_split,
    score_table,
)
from proclab.envs.episodes import quotas, rate
from proclab.envs.rules import with_rule
from proclab.envs.state import GoalTracker, goal_names
from proclab.errors import ProclabError, unknown_choice
from proclab.levels.file import LevelStates, read_level_states
from proclab.levels.play import LevelsEnv, check_levels_fit
from proclab.models.edited import Intervened
from proclab.models.interventions import parse_edits
from proclab.models.loading import load_agent
from proclab.models.scripted import ScriptedAgent
from proclab.rl.rollout import Actor
from proclab.run.runtime import Runtime, RuntimeConfig

if TYPE_CHECKING:
    from proclab.models.agent import Agent


@dataclass
class SplitResult:
    split: str
    game: str
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    completed: list[bool] = field(default_factory=list)
    goals: dict[str, list[bool]] = field(default_factory=dict)
    """Per goal of the game (with goals tracked), whether each episode reached it."""

    def summary(self, mode: str, table: str | None = None) -> dict:
        r = np.asarray(self.returns, dtype=np.float64)
        return {
            "split": self.split,
            "game": self.game,
            "episodes": int(r.size),
            "return_mean": float(r.mean()),
            "return_std": float(r.std()),
            "return_sem": float(r.std(ddof=1) / np.sqrt(r.size)) if r.size > 1 else 0.0,
            "length_mean": float(np.mean(self.lengths)),
            "level_complete_rate": float(np.mean(self.completed)),
            "normalized_score": normalized_score(self.game, float(r.mean()), mode, table=table),
            **(
                {"goals": {name: rate(reached) for name, reached in self.goals.items()}} if self.goals else {}
            ),
        }


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
    reset_every: int = 0,
    progress=None,
    levels: LevelStates | None = None,
    goals: bool = False,
) -> dict[str, SplitResult]:
    """Play ``episodes`` complete episodes per game on ``split``, or from the states of ``levels`` (then
    ``split`` only labels the results); results per game (with ``goals``, each episode's goals too)."""
    games = env_config.games()
    per_game = max(1, min(envs_per_game, episodes))
    env = ProcgenVecEnv(
        replace(env_config, num_envs=per_game * len(games)),
        seed=seed,
        split=env_config.split if levels is not None else split,
    )
    if levels is not None:
        env = LevelsEnv(env, levels)
    try:
        return evaluate_env(
            agent,
            env,
            episodes,
            runtime,
            greedy=greedy,
            split=str(split),
            reset_every=reset_every,
            progress=progress,
            goals=goals,
        )
    finally:
        env.close()


def evaluate_env(
    agent,
    env,
    episodes: int,
    runtime: Runtime,
    *,
    greedy: bool = False,
    split: str = "",
    reset_every: int = 0,
    progress=None,
    goals: bool = False,
) -> dict[str, SplitResult]:
    """Evaluate on an existing vector env (``games``, ``game_index``, ``step`` as ProcgenVecEnv).

    ``reset_every > 0`` resets every env's agent state to the initial one every that many steps
    (besides episode starts), counted from the start of the evaluation. ``goals``: also whether each
    episode reached each of its game's goals (:class:`~proclab.envs.state.GoalTracker`, which reads the
    env's ``slot_states()`` after every step).
    """
    games = env.games
    slot_quota = np.empty(env.num_envs, np.int64)
    for g in range(len(games)):
        slot_quota[env.game_index == g] = quotas(episodes, int((env.game_index == g).sum()))
    results = {game: SplitResult(split=split, game=game) for game in games}
    counts = np.zeros(env.num_envs, np.int64)
    actor = Actor(env, agent, runtime)
    tracker = GoalTracker(games, env.game_index, env.slot_states()) if goals else None
    if tracker is not None:
        for game in games:
            results[game].goals = {name: [] for name in goal_names(game)}
    steps = 0
    while (counts < slot_quota).any():
        if reset_every > 0 and steps > 0 and steps % reset_every == 0:
            actor.first = torch.ones_like(actor.first)
        steps += 1
        active = counts < slot_quota
        rows = None if active.all() else torch.from_numpy(np.flatnonzero(active)).to(runtime.device)
        _, action, _, state = actor.act(greedy=greedy, rows=rows)  # envs with a full quota idle
        _, _, info = actor.env_step(action, state)
        ep = info["episode"]
        reached = (
            tracker.step(env.slot_states(), ep["done"], ep["level_complete"]) if tracker is not None else {}
        )
        for i in np.flatnonzero(ep["done"] & active):
            res = results[games[env.game_index[i]]]
            res.returns.append(float(ep["return"][i]))
            res.lengths.append(int(ep["length"][i]))
            res.completed.append(bool(ep["level_complete"][i]))
            for name, outcomes in res.goals.items():
                outcomes.append(reached[i][name])
            counts[i] += 1
            if progress is not None:
                progress()
    return results


def results_table(rows: list[dict], mode: str, table: str | None = None) -> dict:
    """Rows per (split, game) plus the per-split aggregate (mean normalised score over games)."""
    aggregate = {}
    for split in dict.fromkeys(r["split"] for r in rows):
        means = {r["game"]: r["return_mean"] for r in rows if r["split"] == split}
        score = mean_normalized_score(means, mode, table=table)
        aggregate[split] = {"games": len(means), "mean_normalized_score": score}
    return {"mode": mode, "score_table": score_table(mode, table), "rows": rows, "aggregate": aggregate}


def paper_rows(table: dict) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the paper's layout: per game, the mean return and normalised score x 100
    on each split; a last row with the mean score x 100 over games per split."""
    splits = list(table["aggregate"])
    cells = {(r["game"], r["split"]): r for r in table["rows"]}
    header = ["game"] + [f"{s} {col}" for s in splits for col in ("return", "score")]
    rows = []
    for game in dict.fromkeys(r["game"] for r in table["rows"]):
        row = [game]
        for s in splits:
            r = cells[(game, s)]
            row += [f"{r['return_mean']:.2f}", f"{100 * r['normalized_score']:.1f}"]
        rows.append(row)
    mean = ["mean"]
    for s in splits:
        mean += ["", f"{100 * table['aggregate'][s]['mean_normalized_score']:.1f}"]
    return header, [*rows, mean]


@dataclass(frozen=True)
class Protocol:
    greedy: bool
    episodes: int
    splits: tuple[str, ...]


PROTOCOLS = {  # modern-srwm (spec 1.6): 200 episodes per game, train [0, 200) and three test splits
    "srwm": Protocol(greedy=True, episodes=200, splits=("train", "test1", "test2", "test3")),
    "srwm-sampled": Protocol(greedy=False, episodes=200, splits=("train", "test1", "test2", "test3")),
}


@dataclass(frozen=True)
class EvalSettings:
    """How :func:`evaluate_agent` plays an agent: its fields are ``proclab eval``'s options (see its ``--help``)."""

    split: tuple[
        str, ...
    ] = ()  # level splits (named, START:NUM or held-out); empty: train and held-out, or the preset's
    episodes: int | None = None  # per split and game (None: 100, the preset's, one per state of levels_from)
    greedy: bool = False  # take the most likely action instead of sampling
    preset: str | None = None  # a seed's test protocol (PROTOCOLS): defaults of split, episodes and greedy
    envs_per_game: int = 16  # parallel envs per game (each runs a fixed quota of episodes)
    reset_every: int = 0  # reset the agent's memory every N steps (0: only at episode starts)
    score_table: str | None = None  # difficulty whose (R_min, R_max) normalise scores (None: the mode's own)
    seed: int = 0  # seed of the evaluation envs and action sampling
    levels_from: Path | None = None  # play the states of this level-state file instead of level splits
    edit: tuple[str, ...] = ()  # edits at hook points, "HOOK SELECTION KIND VALUE", on every forward pass
    random_baseline: bool = False  # also play a uniformly random agent on the same splits, episodes and seed
    goals: bool = False  # also count the episodes that reached each of the game's two goals (CoinRun, Maze)
    level_rule: str | None = None  # edit every level at its start by this rule (None: the agent's own)


def protocol_settings(settings: EvalSettings) -> tuple[int, bool, tuple[str, ...]]:
    """Episodes per game, greedy or not, and splits: the settings, with a preset's protocol as defaults."""
    if settings.preset is not None and settings.preset not in PROTOCOLS:
        raise unknown_choice("eval preset", settings.preset, PROTOCOLS)
    protocol = PROTOCOLS.get(
        settings.preset, Protocol(greedy=False, episodes=100, splits=("train", HELD_OUT))
    )
    episodes = protocol.episodes if settings.episodes is None else settings.episodes
    if episodes < 1:
        raise ProclabError(f"--episodes must be >= 1, got {episodes}")
    if settings.reset_every < 0:
        raise ProclabError(f"--reset-every must be >= 0, got {settings.reset_every}")
    if settings.levels_from is not None and (settings.split or settings.preset is not None):
        raise ProclabError("--levels-from plays a file's levels; it excludes --split and --preset")
    return episodes, settings.greedy or protocol.greedy, settings.split or protocol.splits


def goals_wanted(settings: EvalSettings, env_config: EnvConfig) -> bool:
    """Whether to count each episode's goals: on ``--goals``, and always under a level rule: a rule that moves a
    goal (CoinRun's coin, Maze's cheese) is what the goals measure."""
    return settings.goals or bool(env_config.level_rule)


def levels_label(path: Path) -> str:
    """The split label of results played from a level-state file."""
    return f"levels:{path}"


@dataclass(frozen=True)
class Evaluation:
    """An agent's results table, with the agent, env config and runtime it was played with, so that
    a caller comparing another agent on the same levels (the quickstart's random agent) does not
    read the checkpoint again."""

    table: dict
    agent: Agent
    env_config: EnvConfig
    runtime: Runtime
    episodes: int
    """Complete episodes per split and game."""


def evaluate_agent(agent_path: Path, settings: EvalSettings, runtime: RuntimeConfig, console) -> Evaluation:
    """Load the agent (a run or checkpoint directory) once, check the settings against it, and play every
    split on ``runtime`` (with a progress bar on ``console``).

    The settings are checked before anything is played, so a mistake costs no evaluation time; the seed
    is set before the agent is built, so sampled actions are the same for the same ``seed``.
    """
    episodes, greedy, split_names = protocol_settings(settings)
    rt = runtime.runtime()
    torch.manual_seed(settings.seed)
    agent, env_config, ckpt = load_agent(agent_path, rt)
    env_config = with_rule(env_config, settings.level_rule)
    if settings.edit:
        agent = Intervened(agent, parse_edits(settings.edit))
    score_table(env_config.mode, settings.score_table)  # refuse a bad --score-table before playing
    levels = None
    if settings.levels_from is not None:
        levels = read_level_states(settings.levels_from)
        check_levels_fit(
            levels, env_config.games(), env_config.mode, f"level-state file {str(settings.levels_from)!r}"
        )
        split_names = (levels_label(settings.levels_from),)
        episodes = len(levels) if settings.episodes is None else episodes
    else:  # "held-out": the levels after the agent's training levels (test1 for an agent trained on train)
        split_names = tuple(
            str(agent_split(n, env_config.split)) if n == HELD_OUT else n for n in split_names
        )
        note_training_overlaps(split_names, env_config.split)
    goals = goals_wanted(settings, env_config)
    rows = []
    with Progress(console=console, transient=True) as bar:
        for split in split_names:
            task = bar.add_task(f"eval {split}", total=episodes * len(env_config.games()))
            res = evaluate(
                agent,
                env_config,
                split,
                episodes,
                rt,
                greedy=greedy,
                envs_per_game=settings.envs_per_game,
                seed=settings.seed,
                reset_every=settings.reset_every,
                progress=lambda t=task: bar.advance(t),
                levels=levels,
                goals=goals,
            )
            rows.extend(r.summary(env_config.mode, settings.score_table) for r in res.values())
    table = results_table(rows, env_config.mode, settings.score_table)
    if settings.random_baseline:
        table["random"] = random_rows(
            agent.config.num_actions, env_config, split_names, episodes, rt, settings, levels, goals
        )
    table.update(
        checkpoint=str(ckpt.path),
        levels_from=None if settings.levels_from is None else str(settings.levels_from),
        level_rule=env_config.level_rule if settings.levels_from is None else "",
        step=ckpt.step,
        greedy=greedy,
        protocol=settings.preset,
        reset_every=settings.reset_every,
    )
    return Evaluation(table, agent, env_config, rt, episodes)


def random_rows(
    num_actions: int,
    env_config: EnvConfig,
    split_names: tuple[str, ...],
    episodes: int,
    rt: Runtime,
    settings: EvalSettings,
    levels: LevelStates | None = None,
    goals: bool = False,
) -> list[dict]:
    """A uniformly random agent's summary rows on the same splits, episodes and seed (its action draws
    seeded afresh, so they do not depend on how many the agent's evaluation took)."""
    torch.manual_seed(settings.seed)
    agent = ScriptedAgent.uniform(num_actions)
    rows = []
    for split in split_names:
        res = evaluate(
            agent,
            env_config,
            split,
            episodes,
            rt,
            envs_per_game=64,
            seed=settings.seed,
            levels=levels,
            goals=goals,
        )
        rows.extend(r.summary(env_config.mode, settings.score_table) for r in res.values())
    return rows


def note_training_overlaps(split_names: tuple[str, ...], train_split: str) -> None:
    """A note on stderr for each evaluated split that shares levels with the training split.

    A note, not a refusal: evaluating on the training levels is legitimate (``train`` itself is
    skipped), but a test split that overlaps them partly is most likely a mistake.
    """
    splits = [parse_split(s) for s in split_names]
    train = parse_split(train_split)
    for s in splits:
        if s.bounded and train.bounded and s != train and s.overlaps(train):
            try:
                check_disjoint(train, s)
            except ProclabError as err:
                Console(stderr=True).print(f"[yellow]note:[/yellow] {err}")


def print_results(console, evaluation: Evaluation, out: Path | None = None) -> None:
    """The results as a table: the paper's layout under a preset, else one row per split and game (and where
    they were written, ``out``)."""
    table = evaluation.table
    actions = "greedy" if table["greedy"] else "sampled"
    rule = f", levels edited by {table['level_rule']}" if table.get("level_rule") else ""
    title = f"{table['checkpoint']} (step {table['step']:,}, {actions} actions, {evaluation.episodes} episodes{rule})"
    if table["protocol"] is not None:
        console.print(paper_table(table, title))
        return
    console.print(rows_table(table, title, several_games=len(evaluation.env_config.games()) > 1))
    if out is not None:
        console.print(f"results written to {out}")


def paper_table(table: dict, title: str) -> Table:
    """:func:`paper_rows` as a rich table, the row of means in bold."""
    header, body = paper_rows(table)
    t = Table(title=title + "; score = normalised x 100")
    for i, col in enumerate(header):
        t.add_column(col, justify="left" if i == 0 else "right")
    for row in body:
        t.add_row(*row, style="bold" if row[0] == "mean" else None)
    return t


def rows_table(table: dict, title: str, several_games: bool) -> Table:
    """One row per (split, game), and with ``several_games`` the mean normalised score of each split; with
    goals, a column per goal: its rate, exact 95 % interval and count (empty for a game without it)."""
    t = Table(title=title)
    rows = table["rows"] + [{**r, "game": f"{r['game']} (random agent)"} for r in table.get("random", [])]
    goals = list(dict.fromkeys(name for r in rows for name in r.get("goals", {})))
    for col in ("split", "game", "episodes", "return", "length", "completed", "normalised"):
        t.add_column(col, justify="left" if col in ("split", "game") else "right")
    for name in goals:
        t.add_column(f"{name} [95% CI] n", justify="right")
    for r in rows:
        t.add_row(
            r["split"],
            r["game"],
            str(r["episodes"]),
            f"{r['return_mean']:.2f} ± {r['return_std']:.2f}",
            f"{r['length_mean']:.0f}",
            f"{r['level_complete_rate']:.2f}",
            f"{r['normalized_score']:.3f}",
            *(goal_cell(r.get("goals", {}).get(name)) for name in goals),
        )
    if several_games:
        for split, agg in table["aggregate"].items():
            t.add_row(
                split,
                "[bold]mean",
                "",
                "",
                "",
                "",
                f"[bold]{agg['mean_normalized_score']:.3f}",
                *[""] * len(goals),
            )
    return t


def goal_cell(summary: dict | None) -> str:
    """A goal's rate as the table shows it: ``0.41 [0.31, 0.52] 41``; empty where the game has no such goal."""
    if summary is None:
        return ""
    low, high = summary["ci95"]
    return f"{summary['rate']:.2f} [{low:.2f}, {high:.2f}] {summary['count']}"
