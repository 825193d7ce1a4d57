"""A population of PPO agents trained as one call: a grid of seeds x games x level rules x reward rules x
presets.

Research on Procgen compares agents, not one agent: several seeds of a setting, the same setting on several
games, with and without a level rule. :func:`train_population` trains such a grid, each member an ordinary
resumable run of :class:`~proclab.rl.ppo_train.Trainer` under the population's folder, then evaluates every
member on its training levels and on held-out ones (:func:`~proclab.rl.evaluate.evaluate_agent`), and returns
one table (:class:`Population`), also written as ``population.csv`` beside the runs.

**Restarts are free.** A member's run name is derived from its settings (:attr:`Member.name`), so a second
call with the same folder finds each member's run: a run whose last checkpoint reached the budget is not
trained again (its evaluation, kept in the run as ``population-eval.json``, is read back unless the checkpoint
or the episodes changed), an unfinished one resumes from its last checkpoint exactly as ``proclab train
--resume`` would, and a larger budget trains a finished run further (recorded in its
``config_history.jsonl``). A killed population therefore loses at most the work since each member's last
checkpoint.

**What the table's returns are.** Every member is evaluated under the game's own reward, on its level rule's
levels: a member paid by a reward rule (:mod:`proclab.envs.rewards`, the goal-misgeneralization organisms) is
trained for one goal and measured by what the game pays, and which goal it pursues is the counterfactual label's
question (:func:`proclab.analyze.goal_label`), not a return's.

**One member's failure is the member's.** A member whose settings are invalid (a level rule of another game)
or whose training raises is a row with its error; the other members still train.

**Where members run.** By default one after another in this process; ``workers=N`` runs N at a time in
processes of their own (spawned, so that no torch state is shared); with ``ray_address`` (or ``RAY_ADDRESS``)
each member is a Ray task with ``cpus_per_member`` (also its torch threads) and ``gpus_per_member``, and the
folder must then be one every node writes to (a shared file system); :mod:`proclab.run.tasks` runs them. A
member whose worker is killed is run again by Ray and resumes from its run's last checkpoint. Members are plain
Ray tasks rather than Ray Tune trials: the run folder already is what Tune's experiment state would be (a
restart skips finished members and resumes the others), there is no search to schedule, and Tune would add
its own dependencies and a second copy of each member's state.
"""

from __future__ import annotations

import csv
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

from proclab.envs import HELD_OUT
from proclab.errors import ProclabError
from proclab.io.checkpoint import find_checkpoint, load_checkpoint_meta
from proclab.io.configs import from_dict, to_dict
from proclab.io.files import read_json, write_json, write_text
from proclab.io.progress import progress_bar
from proclab.io.results import Result, csv_text
from proclab.io.run_dirs import read_run_config, record_config_change
from proclab.models.bundled import source_path
from proclab.rl.config import TrainConfig
from proclab.rl.evaluate import EvalSettings, evaluate_agent
from proclab.rl.ppo_train import Trainer, preset_config
from proclab.run.runtime import RuntimeConfig
from proclab.run.tasks import TaskSettings, run_tasks

CSV = "population.csv"
EVAL = "population-eval.json"
NO_RULE = "none"
"""The level rule that leaves the levels as procgen makes them (:func:`~proclab.envs.rules.with_rule`)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]+")


@dataclass(frozen=True)
class Member:
    """One agent of a population: the settings that tell it from the others."""

    seed: int
    game: str
    level_rule: str
    """A rule of :mod:`proclab.envs.rules` (``NAME[:KEY=VALUE,...]``), or ``none``."""
    preset: str | TrainConfig
    """A preset's name (``proclab train --preset``) or a config to start from (its ``name`` names it)."""
    reward_rule: str = NO_RULE
    """A rule of :mod:`proclab.envs.rewards` (the goal that pays), or ``none`` for the game's own reward."""

    @property
    def preset_name(self) -> str:
        """The preset as the member's name and table say it."""
        return self.preset if isinstance(self.preset, str) else self.preset.name

    @property
    def name(self) -> str:
        """The member's run name, ``GAME-PRESET-rule_RULE[-pays_REWARD]-sSEED`` (e.g.
        ``coinrun-quickstart-rule_none-s1``, ``maze-quickstart-rule_cheese-region_size_99-pays_corner-pays-s2``):
        the same settings always give the same name, which is how a restarted population finds the member's
        run (a member paid by the game's own reward has no ``pays_`` part)."""
        rule = _UNSAFE.sub("_", self.level_rule).strip("_") or NO_RULE
        pays = "" if self.reward_rule == NO_RULE else f"-pays_{_UNSAFE.sub('_', self.reward_rule)}"
        game, preset = _UNSAFE.sub("_", self.game), _UNSAFE.sub("_", self.preset_name)
        return f"{game}-{preset}-rule_{rule}{pays}-s{self.seed}"

    def result(self, status: str, **outcome: Any) -> MemberResult:
        """The member's row: its settings, ``status`` and what came of it (:class:`MemberResult`'s fields)."""
        return MemberResult(
            self.name,
            self.seed,
            self.game,
            self.level_rule,
            self.reward_rule,
            self.preset_name,
            status,
            **outcome,
        )

    def config(self, steps: int, root: Path, runtime: RuntimeConfig) -> TrainConfig:
        """The member's training run: its preset on its game and levels, ``steps`` env steps, under ``root``."""
        return preset_config(
            self.game, self.preset, steps=steps, seed=self.seed, runs=root, name=self.name,
            level_rule=self.level_rule, reward_rule="" if self.reward_rule == NO_RULE else self.reward_rule,
            device=runtime.device, precision=runtime.precision,
            channels_last=runtime.channels_last, torch_threads=runtime.torch_threads,
        )  # fmt: skip


@dataclass(frozen=True)
class PopulationSettings:
    """What :func:`train_population` trains, and where: the grid, each member's budget and its evaluation."""

    seeds: tuple[int, ...] = (1,)
    """Seeds of every setting (levels, initial weights and action sampling)."""
    games: tuple[str, ...] = ("coinrun",)
    """Games, one per member."""
    level_rules: tuple[str, ...] = (NO_RULE,)
    """Level rules (:mod:`proclab.envs.rules`), ``none`` for the standard levels."""
    reward_rules: tuple[str, ...] = (NO_RULE,)
    """Reward rules (:mod:`proclab.envs.rewards`: the goal that pays), ``none`` for the game's own reward."""
    presets: tuple[str | TrainConfig, ...] = ("quickstart",)
    """Presets by name, or configs to start from (e.g. a preset with a smaller agent; its ``name`` names it)."""
    steps: int = 200_000
    """Env steps each member trains for (its budget; whole rollouts of it)."""
    eval_episodes: int = 20
    """Complete episodes per member on its training levels and on held-out levels."""
    workers: int = 1
    """Members trained at the same time on this machine, each in a process of its own (1: in this one)."""
    ray_address: str | None = None
    """Run members as Ray tasks on this cluster (``auto``, ``ray://HOST:10001``, ``local``); default: the
    ``RAY_ADDRESS`` environment variable, else this machine without Ray."""
    cpus_per_member: float = 1
    """CPUs Ray reserves for each member."""
    gpus_per_member: float = 0
    """GPUs (or fractions of one) Ray reserves for each member."""

    def members(self) -> tuple[Member, ...]:
        """The grid, seeds outermost: a stopped population holds one seed of every setting before a second."""
        grid = tuple(
            Member(seed, game, rule, preset, pays)
            for seed, game, rule, pays, preset in itertools.product(
                self.seeds, self.games, self.level_rules, self.reward_rules, self.presets
            )
        )
        names = [m.name for m in grid]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ProclabError(
                f"population members share a name (a setting given twice?): {', '.join(twice)}"
            )
        return grid

    def tasks(self) -> TaskSettings:
        """Where the members train (:func:`~proclab.run.tasks.run_tasks`): one unit per member."""
        return TaskSettings(self.workers, self.ray_address, self.cpus_per_member, self.gpus_per_member)

    def check(self) -> None:
        """Refuse a population that cannot run, before any member trains."""
        if not self.members():
            raise ProclabError("the population is empty: give at least one seed, game, level rule and preset")
        if self.steps < 1 or self.eval_episodes < 1:
            raise ProclabError("steps and eval_episodes must be >= 1")
        self.tasks().check()


@dataclass(frozen=True)
class MemberResult:
    """One member after :func:`train_population`: how far it trained and how it plays, or why it failed."""

    name: str
    seed: int
    game: str
    level_rule: str
    reward_rule: str
    preset: str
    status: str
    """``trained`` (a new run), ``resumed``, ``finished before`` (nothing to train) or ``failed``."""
    steps: int = 0
    """Env steps of the run's last checkpoint."""
    train_return: float = math.nan
    """Mean return on its training levels."""
    held_out_return: float = math.nan
    """Mean return on the levels after its training levels (``held-out``)."""
    run_dir: Path | None = None
    error: str | None = None


@dataclass(frozen=True)
class Population(Result):
    """The members of a population, one row each (:meth:`table`), with the folder that holds their runs."""

    root: Path
    members: tuple[MemberResult, ...] = field(default_factory=tuple)

    def table(self) -> list[dict]:
        """One row per member: its settings, steps trained, mean returns on train and held-out levels, run
        folder and error (None when it trained)."""
        return [
            {
                "member": m.name,
                "seed": m.seed,
                "game": m.game,
                "level_rule": m.level_rule,
                "reward_rule": m.reward_rule,
                "preset": m.preset,
                "status": m.status,
                "steps": m.steps,
                "train_return": m.train_return,
                "held_out_return": m.held_out_return,
                "run_dir": None if m.run_dir is None else str(m.run_dir),
                "error": m.error,
            }
            for m in self.members
        ]

    @property
    def failed(self) -> tuple[MemberResult, ...]:
        """The members whose training or evaluation raised."""
        return tuple(m for m in self.members if m.error is not None)


@dataclass(frozen=True)
class _Job:
    """A member with everything it needs to train alone (in this process, a spawned one or a Ray task)."""

    member: Member
    steps: int
    root: Path
    eval_episodes: int
    runtime: RuntimeConfig


def train_population(
    settings: PopulationSettings,
    root: str | Path = "population",
    *,
    runtime: RuntimeConfig | None = None,
    progress: bool = True,
) -> Population:
    """Train and evaluate every member of ``settings``' grid under ``root`` (module docstring), skipping the
    members already trained and resuming the unfinished, and write the table as ``root/population.csv``.

    ``runtime`` (device, precision, threads) applies to every member's training and evaluation (with
    ``workers`` and torch's default threads, each worker gets its share of the cores); ``progress`` shows a bar
    over the members (their own bars are off: one live display at a time)."""
    settings.check()
    root = Path(root)
    runtime = runtime or RuntimeConfig()
    where = settings.tasks()
    runtime = replace(runtime, torch_threads=where.unit_threads(runtime.torch_threads))
    jobs = [_Job(m, settings.steps, root, settings.eval_episodes, runtime) for m in settings.members()]
    done = (_or_failed(get, jobs[i]) for i, get in run_tasks(train_member, jobs, where))
    results: dict[str, MemberResult] = {}
    columns = (
        TextColumn("population: {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with progress_bar(*columns, disable=not progress) as bar:
        task = bar.add_task(f"{len(jobs)} members", total=len(jobs))
        for result in done:
            results[result.name] = result
            bar.update(task, advance=1, description=f"{result.name} {result.status}")
    population = Population(root, tuple(results[job.member.name] for job in jobs))
    write_csv(population)
    return population


def write_csv(population: Population) -> Path:
    """``root/population.csv``, written atomically: this population's rows, after the rows of members of other
    grids trained in the same folder before (kept, so that no call silently loses another's table)."""
    path = population.root / CSV
    rows = population.table()
    names = {row["member"] for row in rows}
    if path.is_file():
        with path.open(newline="") as f:
            rows = [row for row in csv.DictReader(f) if row.get("member") not in names] + rows
    return write_text(path, csv_text(rows), "population table")


def member_runs(root: str | Path) -> list[tuple[str, Path]]:
    """The run of every member ``root/population.csv`` lists (in its order) that has one and did not fail, with
    the member's name: how a population folder names its agents (:func:`~proclab.rl.evaluations.evaluate_agents`)."""
    path = Path(root) / CSV
    if not path.is_file():
        raise ProclabError(
            f"{str(root)!r} holds no {CSV}: train a population there first (proclab population)"
        )
    with path.open(newline="") as f:
        rows = [row for row in csv.DictReader(f) if row.get("run_dir") and not row.get("error")]
    return [(row["member"], _anchored(Path(root), Path(row["run_dir"]))) for row in rows]


def _anchored(root: Path, run_dir: Path) -> Path:
    """A member's run as the table names it, found under ``root``: a relative path was relative to where the
    population trained, so its last four parts (``ALGO/GAME/NAME/RUN``, :func:`latest_run`) are taken under
    ``root`` wherever the caller stands."""
    return run_dir if run_dir.is_absolute() else root.joinpath(*run_dir.parts[-4:])


def agent_sources(agents: list[str | Path] | tuple[str | Path, ...]) -> list[tuple[str, Path]]:
    """Each agent's name and folder, in order, as the calls on many agents take them
    (:func:`~proclab.rl.evaluations.evaluate_agents`, :func:`~proclab.interpret.probes.agents.probe_agents`): a
    population folder (holding ``population.csv``) stands for its members' runs (:func:`member_runs`), a shipped
    agent's name for its folder, anything else for itself."""
    out: list[tuple[str, Path]] = []
    for agent in agents:
        if (Path(agent) / CSV).is_file():
            out.extend(member_runs(agent))
        else:
            out.append((str(agent), source_path(agent)))
    names = [name for name, _ in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ProclabError(f"agents given twice: {', '.join(twice)}")
    if not out:
        raise ProclabError(
            "no agent to evaluate: name at least one (a population folder's members that trained)"
        )
    return out


def train_member(job: _Job) -> MemberResult:
    """Train (or resume, or skip) one member and evaluate it; whatever it raises is its row's error, so that a
    population goes on without it."""
    member, run_dir = job.member, None
    try:
        config = member.config(job.steps, job.root, job.runtime)
        config.validate()  # before a run directory is made for it
        run_dir, step = latest_run(job.root, config)
        status = "finished before"
        if run_dir is None or step < config.end_step():
            status = "trained" if run_dir is None else "resumed"
            run_dir = train_or_resume(config, run_dir, step)
        step = int(load_checkpoint_meta(run_dir, kind="agent")["step"])
        train_return, held_out_return = _evaluation(run_dir, step, job)
        return member.result(status, steps=step, train_return=train_return,
                             held_out_return=held_out_return, run_dir=run_dir)  # fmt: skip
    except Exception as err:  # the member's failure, recorded; the population goes on
        text = str(err) if isinstance(err, ProclabError) else f"{type(err).__name__}: {err}"
        return member.result("failed", run_dir=run_dir, error=text)


def latest_run(root: Path, config: TrainConfig) -> tuple[Path | None, int]:
    """The member's run under ``root`` that got furthest, and the step of its last checkpoint; ``(None, 0)``
    when none has a checkpoint (a run killed before its first one is started again, in a new folder). Only
    runs of ``config.seed`` count (run folders are ``SEED-TIMESTAMP``): runs of one name and other seeds are
    other members."""
    best: tuple[Path | None, int] = (None, 0)
    for run in sorted((root / config.algo).glob(f"*/{config.name}/{config.seed}-*/config.json")):
        try:
            step = int(load_checkpoint_meta(run.parent, kind="agent")["step"])
        except ProclabError:  # no checkpoint yet
            continue
        if best[0] is None or step > best[1]:
            best = (run.parent, step)
    return best


def train_or_resume(config: TrainConfig, run_dir: Path | None, step: int) -> Path:
    """Train a new run of ``config``, or resume ``run_dir`` (at ``step``) with its saved config to
    ``config``'s budget and time limit, as ``proclab train --resume RUN --total-steps N --time-limit S`` does."""
    if run_dir is not None:
        saved = from_dict(TrainConfig, read_run_config(run_dir))
        total = config.ppo.total_steps
        if saved.ppo.total_steps != total:
            old = saved.ppo.total_steps
            saved = replace(saved, ppo=replace(saved.ppo, total_steps=total))
            record_config_change(run_dir, to_dict(saved), {"ppo.total_steps": (old, total)}, step)
        config = replace(saved, time_limit=config.time_limit)  # a time limit bounds this call alone
    trainer = Trainer(config, run_dir=run_dir, resume=run_dir is not None)
    try:
        return trainer.train(progress=False)
    finally:
        trainer.close()


def _evaluation(run_dir: Path, step: int, job: _Job) -> tuple[float, float]:
    """Mean returns on the training and held-out levels of the run's last checkpoint: read back from the
    run's ``population-eval.json`` when it holds those of this checkpoint and episodes, else played (and
    written there, so that a restarted population need not play them again)."""
    path = run_dir / EVAL
    if path.is_file():
        kept = read_json(path, "population evaluation")
        if (
            kept.get("checkpoint") == find_checkpoint(run_dir).name
            and kept.get("episodes") == job.eval_episodes
        ):
            return _nan(kept["train_return"]), _nan(kept["held_out_return"])
    settings = EvalSettings(
        split=(from_dict(TrainConfig, read_run_config(run_dir)).env.split, HELD_OUT),
        episodes=job.eval_episodes,
        envs_per_game=min(16, job.eval_episodes),
    )
    table = evaluate_agent(run_dir, settings, job.runtime, Console(quiet=True)).table
    means = []
    for split in table["aggregate"]:  # in the order played: the training levels, then the held-out ones
        returns = [row["return_mean"] for row in table["rows"] if row["split"] == split]
        means.append(sum(returns) / len(returns))
    train_return, held_out_return = means
    write_json(path, {"checkpoint": find_checkpoint(run_dir).name, "step": step, "episodes": job.eval_episodes,
                      "train_return": train_return, "held_out_return": held_out_return},
               "population evaluation")  # fmt: skip
    return train_return, held_out_return


def _nan(value: Any) -> float:
    """A return as JSON keeps it: a number, or null for NaN (JSON has none)."""
    return math.nan if value is None else float(value)


def _or_failed(result: Callable[[], MemberResult], job: _Job) -> MemberResult:
    """The member's result, or, when its process or task died before it could say (``train_member`` catches
    what training raises; a Ray task is first run again, :mod:`proclab.run.tasks`), a failed row with what
    killed it."""
    try:
        return result()
    except Exception as err:
        return job.member.result("failed", error=f"{type(err).__name__}: {err}")
