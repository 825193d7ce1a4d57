"""``proclab eval``, ``proclab render``, ``proclab plot`` and ``proclab population``: an agent's returns per level
split (:mod:`.evaluate`), a video of it playing (:mod:`.render`), runs' training curves (:mod:`.curves`), and a
grid of PPO agents trained and evaluated as one call (:mod:`.population`).

``proclab plot --help`` must load no torch, and this module holds its arguments too: the arguments here are
torch-free (the runtime group as :class:`~proclab.run.runtime_flags.RuntimeFlags`), and the evaluation and
the video (and the population), which play the agent with torch, are imported when their command runs. (``proclab train``, which
also trains on a learned reward from the layer above, is :mod:`proclab.command`.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import tyro
from rich.console import Console

from proclab.errors import ProclabError
from proclab.io.arguments import AGENT, AGENTS, LevelRuleFlag, settings_from
from proclab.io.files import write_json
from proclab.rl.curves import plot_runs
from proclab.run.runtime_flags import RuntimeFlags

if TYPE_CHECKING:
    from proclab.rl.evaluate import Evaluation
    from proclab.rl.evaluations import Evaluations


# -- proclab eval -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class EvalArgs(RuntimeFlags, LevelRuleFlag):
    """Evaluate an agent, or several: mean/std return and normalised score per level split (and per game)."""

    agent: Annotated[Path | None, AGENT] = None
    """The agent: a proclab run or checkpoint directory (a run: its latest checkpoint)."""
    agents: Annotated[tuple[Path, ...], AGENTS] = ()
    """Evaluate several agents instead, each alone as --agent would (the same numbers), in one table of a row per
    agent, split and game: run or checkpoint directories, shipped agents' names (coinrun/small), or population
    folders (proclab population --out: the members that trained, in population.csv's order)."""
    split: tyro.conf.UseAppendAction[tuple[str, ...]] = ()
    """Level split to evaluate on (named, START:NUM, or held-out: the levels after the agent's training levels);
    repeat for several. Default: train and held-out (or the preset's)."""
    episodes: int | None = None
    """Complete episodes per split and game (default: 100, or the preset's)."""
    greedy: bool = False
    """Take the most likely action instead of sampling."""
    preset: str | None = None
    """Named defaults, a seed's test protocol: srwm (greedy, 200 episodes per game, splits train test1
    test2 test3, printed as the paper's table of scores x 100 per game) or srwm-sampled (the same,
    sampling actions); --episodes and --split override them."""
    envs_per_game: int = 16
    """Parallel envs per game (each runs a fixed quota of episodes)."""
    reset_every: int = 0
    """Reset the agent's memory every N steps (modern-srwm's --test_no_carry_sr used its unroll
    length, 50); 0 = only at episode starts."""
    score_table: str | None = None
    """Difficulty whose (R_min, R_max) normalise scores: easy or hard (default: easy for easy runs,
    hard for every other mode; Procgen publishes constants for easy and hard only)."""
    seed: int = 0
    """Seed of the evaluation envs and action sampling."""
    levels_from: Annotated[Path | None, tyro.conf.arg(metavar="FILE")] = None
    """Play the states of this level-state file instead of level splits (proclab level edit writes
    them): each episode starts from one, in order; --episodes defaults to one per state."""
    edit: tyro.conf.UseAppendAction[tuple[str, ...]] = ()
    """Evaluate the agent with this edit applied at a hook point on every forward pass: "HOOK SELECTION KIND
    VALUE", e.g. "torso.block1.hook_out channel 7 set 0" (kinds set, add, scale; see proclab analyze edit for
    paired comparisons and recorded-distribution edits); repeatable."""
    random_baseline: bool = False
    """Also play a uniformly random agent on the same splits, episodes and seed: the baseline every
    return should be read against (rows under "random" in the JSON)."""
    goals: bool = False
    """Also count, for CoinRun and Maze, the episodes that reached each of the game's two goals: CoinRun's
    coin (level completed) and the level's end cell (touched at some step), Maze's cheese and the maze's
    top-right corner cell; rates with exact 95 % intervals (docs/ground-truth.md). Reads the game state
    after every step, which slows a fast agent down (a random one by about a third)."""
    json: bool = False
    """Print the results as JSON."""
    out: Path | None = None
    """Also write the JSON results to this file (with --agents, also the table as CSV beside it, and
    the results of each agent in OUT-parts/ as they come: the same command again plays only the agents missing)."""
    workers: int = 1
    """--agents: evaluate this many agents at a time, each in a local process of its own."""
    ray_address: Annotated[str | None, tyro.conf.arg(aliases=("--ray",))] = None
    """--agents: evaluate each agent as a Ray task on this cluster (HOST:6379, auto, ray://HOST:10001, local;
    default: $RAY_ADDRESS, else no Ray); every node must read the agents (docs/scale.md). Needs pip install
    'proclab[distributed]'."""
    cpus_per_agent: float = 1
    """--agents with --ray: CPUs Ray reserves for each agent (also its torch threads unless --torch-threads is
    given)."""
    gpus_per_agent: float = 0
    """--agents with --ray: GPUs (or a fraction of one) Ray reserves for each agent."""


def eval_command(argv: list[str], prog: str = "proclab eval") -> None:
    args = tyro.cli(EvalArgs, args=argv, prog=prog)
    if args.agents:
        run_evaluations(args)
    else:
        run_evaluation(args)


def run_evaluation(args: EvalArgs) -> Evaluation:
    """``proclab eval``: the evaluation, printed (JSON with ``--json``) and written to ``--out``."""
    # lazy: command dispatch; playing the agent needs torch, which `proclab plot --help` must not load
    from proclab.rl.evaluate import EvalSettings, evaluate_agent, print_results
    from proclab.run.runtime import RuntimeConfig

    if args.agent is None or args.agents:
        raise ProclabError("name the agent with --agent AGENT, or several with --agents AGENT [AGENT ...]")
    console = Console(stderr=args.json)
    evaluation = evaluate_agent(
        args.agent, settings_from(args, EvalSettings), settings_from(args, RuntimeConfig), console
    )
    if args.out is not None:
        write_json(args.out, evaluation.table, "evaluation results")
    if args.json:
        print(json.dumps(evaluation.table, indent=2))
    else:
        print_results(console, evaluation, args.out)
    return evaluation


def run_evaluations(args: EvalArgs) -> Evaluations:
    """``proclab eval --agents``: every agent evaluated alone, where --workers or --ray say, in one table, printed
    (JSON with ``--json``) and written to ``--out`` (JSON, and the table as CSV beside it)."""
    # lazy: command dispatch, as for one agent
    from proclab.rl.evaluate import EvalSettings
    from proclab.rl.evaluations import evaluate_agents
    from proclab.run.runtime import RuntimeConfig
    from proclab.run.tasks import TaskSettings

    if args.agent is not None:
        raise ProclabError("--agent and --agents exclude each other: give every agent to --agents")
    tasks = TaskSettings(args.workers, args.ray_address, args.cpus_per_agent, args.gpus_per_agent)
    folder = None if args.out is None else args.out.with_name(f"{args.out.stem}-parts")
    evaluations = evaluate_agents(
        args.agents,
        settings_from(args, EvalSettings),
        runtime=settings_from(args, RuntimeConfig),
        tasks=tasks,
        folder=folder,
        progress=not args.json,
    )
    if args.out is not None:
        write_json(args.out, evaluations.to_dict(), "evaluation results")
        evaluations.to_csv(args.out.with_suffix(".csv"))
    if args.json:
        print(json.dumps(evaluations.to_dict(), indent=2))
    else:
        print(evaluations)
        if args.out is not None:
            print(f"results written to {args.out} and {args.out.with_suffix('.csv')}")
    return evaluations


# -- proclab render ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class RenderArgs(RuntimeFlags):
    """Render an agent playing: what it sees, with action, value and reward overlays."""

    agent: Annotated[Path, AGENT]
    """The agent: a proclab run or checkpoint directory (a run: its latest checkpoint)."""
    out: Path = Path("agent.mp4")
    """Output mp4."""
    episodes: int = 1
    """Episodes in the video (played one after the other)."""
    split: str | None = None
    """Level split to play (default: the training split)."""
    game: str | None = None
    """Game to play, for multi-task agents (default: the first game)."""
    greedy: bool = False
    """Take the most likely action instead of sampling."""
    human: bool = False
    """Show procgen's 512x512 high-resolution view beside the agent's view."""
    scale: int = 4
    """Upscaling of the 64x64 agent view (8 when --human, to match its height)."""
    fps: float = 15
    """Frames per second of the video."""
    max_steps: int = 3000
    """Stop after this many steps even if the episodes have not ended."""
    seed: int = 0
    """Seed of the level sequence and action sampling."""


def render_command(argv: list[str], prog: str = "proclab render") -> None:
    args = tyro.cli(RenderArgs, args=argv, prog=prog)
    # lazy: command dispatch, as for eval
    from proclab.rl.render import RenderSettings, render
    from proclab.run.runtime import RuntimeConfig

    path, returns = render(
        args.agent, args.out, settings_from(args, RenderSettings), settings_from(args, RuntimeConfig)
    )
    print(f"episode returns: {', '.join(f'{r:g}' for r in returns) or 'none finished'}")
    print(f"video: {path}")


# -- proclab plot -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlotArgs:
    """Plot training curves (return train vs validation, length, score, losses, SPS) of runs."""

    runs: Annotated[tuple[Path, ...], tyro.conf.Positional, tyro.conf.arg(metavar="RUN [RUN ...]")]
    """Run directories; seeds of the same experiment are drawn as mean +- std."""
    out: Path | None = None
    """Output PNG (default: curves.png in the run directory, or in the current one for several runs)."""
    title: str | None = None
    """Figure title (default: the experiment names)."""


def plot_command(argv: list[str], prog: str = "proclab plot") -> None:
    args = tyro.cli(PlotArgs, args=argv, prog=prog)
    for run in args.runs:
        if not run.is_dir():
            raise ProclabError(f"run directory {str(run)!r} does not exist")
    out = args.out or ((args.runs[0] / "curves.png") if len(args.runs) == 1 else Path("curves.png"))
    print(f"plot: {plot_runs(list(args.runs), out, args.title)}")


# -- proclab population -----------------------------------------------------------------------------
@dataclass(frozen=True)
class PopulationArgs(RuntimeFlags):
    """Train a population of PPO agents (seeds x games x level rules x reward rules x presets), each an ordinary resumable run,
    evaluate each on its training and held-out levels, and write the table as OUT/population.csv. Run it again
    to resume: finished members are skipped, unfinished ones continue from their last checkpoint."""

    seeds: tuple[int, ...] = (1,)
    """Seeds of every setting."""
    games: tuple[str, ...] = ("coinrun",)
    """Games (see proclab games), one per member."""
    level_rules: tuple[str, ...] = ("none",)
    """Level rules NAME[:KEY=VALUE,...] (see proclab train --help, --level-rule), none for the standard levels."""
    reward_rules: tuple[str, ...] = ("none",)
    """Reward rules: the goal that pays (end-pays, corner-pays; see proclab train --help, --reward-rule), none for
    the game's own reward."""
    presets: tuple[str, ...] = ("quickstart",)
    """Training presets (see proclab train --help)."""
    steps: int = 200_000
    """Env steps each member trains for."""
    eval_episodes: int = 20
    """Complete episodes per member on its training levels and on held-out levels."""
    workers: int = 1
    """Members trained at the same time on this machine, each in a process of its own."""
    ray_address: Annotated[str | None, tyro.conf.arg(aliases=("--ray",))] = None
    """Run members as Ray tasks on this cluster (HOST:6379, auto, ray://HOST:10001, local; default: $RAY_ADDRESS,
    else no Ray); OUT must be a folder every node writes to (docs/scale.md). Needs pip install
    'proclab[distributed]'."""
    cpus_per_member: float = 1
    """CPUs Ray reserves for each member (also its torch threads unless --torch-threads is given)."""
    gpus_per_member: float = 0
    """GPUs (or a fraction of one) Ray reserves for each member."""
    out: Path = Path("population")
    """Folder of the members' runs and of population.csv."""


def population_command(argv: list[str], prog: str = "proclab population") -> None:
    args = tyro.cli(PopulationArgs, args=argv, prog=prog)
    # lazy: command dispatch; training needs torch, which `proclab plot --help` must not load
    from proclab.rl.population import CSV, PopulationSettings, train_population
    from proclab.run.runtime import RuntimeConfig

    population = train_population(
        settings_from(args, PopulationSettings), args.out, runtime=settings_from(args, RuntimeConfig)
    )
    print(population)
    print(f"table: {args.out / CSV}")
    if population.failed:
        lines = "; ".join(f"{m.name}: {m.error}" for m in population.failed)
        raise ProclabError(f"{len(population.failed)} of {len(population.members)} members failed: {lines}")
