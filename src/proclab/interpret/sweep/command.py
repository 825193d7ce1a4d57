"""The sweep as a stage on an analysis folder: ``proclab analyze sweep`` (its arguments, :class:`SweepArgs`),
and the quickstart.

Reads the folder's basis and the coordinates ``analyze hidden`` recorded (the recorded
distribution every arm is placed in), loads the agent, draws the paired levels from the split,
plays every (direction, arm) in a Procgen env of ``rows`` slots (:mod:`proclab.interpret.sweep.grid`)
and writes ``ANALYSIS/sweep/`` (see that module; ``ANALYSIS/sweep-<basis>/`` for a basis other than
ica, :mod:`proclab.interpret.workspace.systems`). The table is printed; an edit that holds its
coordinate outside the recorded 0.5-99.5 % range is named in a one-line warning.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, ClassVar

import numpy as np
import torch
import tyro

from proclab.envs import agent_split, distinct_levels
from proclab.envs.rules import with_rule
from proclab.envs.state import glossary
from proclab.interpret.bases.random_directions import WithRandom
from proclab.interpret.interventions.arms import DEFAULT_ARMS, Recorded, parse_arms
from proclab.interpret.interventions.batched_play import ProcgenLevels
from proclab.interpret.interventions.command import BasisArgs, PlayArgs
from proclab.interpret.interventions.edit_target import HIDDEN, agent_checkpoint, recorded, state_key
from proclab.interpret.interventions.goal_watch import GoalWatch
from proclab.interpret.sweep.deaths import RADIUS, Deaths
from proclab.interpret.sweep.grid import FORMAT, NAME, SweepSettings, sweep
from proclab.interpret.sweep.parts import Parts
from proclab.interpret.sweep.report import figure, table_csv, table_text, write_text_atomic
from proclab.interpret.sweep.swaps import parse_swaps, read_atlas, resolve
from proclab.interpret.workspace.folder import Workspace
from proclab.interpret.workspace.selection import parse_ids
from proclab.interpret.workspace.systems import (
    check_system,
    file_digest,
    open_coordinates,
    suffix,
    system_file,
)
from proclab.io.arguments import settings_from
from proclab.io.progress import phases
from proclab.io.run_dirs import write_json_atomic
from proclab.levels.file import read_level_states
from proclab.models.loading import load_agent
from proclab.run.parts import digest, fingerprint_of, run_parts
from proclab.run.tasks import TaskSettings


@dataclass(frozen=True)
class SweepArgs(BasisArgs, PlayArgs):
    """Sweep: every arm on every basis direction, on paired real levels, with corrected CIs.

    Arms: collapse, mean, resample, p05, p95, on, resample-step, and brief ARM@K (docs/analyses.md). Outputs
    in ANALYSIS/sweep (sweep-BASIS for a basis other than ica): one table sorted by effect size, one plot,
    one JSON."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"levels": 50, "permutations": 2000}}

    seed: int = 0
    """Seed of the level draw, the resample-ablation draws, sampled actions, bootstrap and permutations."""
    basis: str = "ica"
    """Coordinates the arms hold: ica (the folder's ICs), pca (its first k PCs), nmf (the NMF of analyze
    hidden), sparse (the dictionary of analyze atlas --basis sparse) or units (the state's own units, z-scored
    as the basis z-scores them)."""
    arms: str = ",".join(DEFAULT_ARMS)
    """Arms, comma-separated: collapse, mean, resample, p05, p95, on, resample-step (a recorded value drawn at
    every step), and brief ones, ARM@K (held for the first K steps, then released: p95@10) (docs/analyses.md)."""
    directions: str | None = None
    """Directions swept, as ids and ranges (e.g. 0:8,12; default: every direction of the basis; none: no
    direction is held, only the baseline and --swaps are played)."""
    levels: int = 200
    """Paired levels, drawn from --split: every (direction, arm) and the baseline play each once."""
    levels_from: Path | None = None
    """Play the states of this level-state file as the paired levels (every state once per variant;
    --levels and --split unused): edited levels (proclab level edit) or recorded ones (level export)."""
    rows: int = 256
    """Episodes played at once: env slots stepped together, one batched agent forward per step."""
    precision: str = field(default="auto", kw_only=True)
    """The agent's arithmetic: fp32, bf16 (autocast), or auto (bf16 where the hardware computes it natively).
    Every variant of a sweep runs at the same precision, so its comparisons stay paired; fp32 reproduces
    sweeps made before this option."""
    permutations: int = 5000
    """Permutations of the paired tests' p-values."""
    correction: str = "holm"
    """Multiple-comparison correction over the directions: holm or bh (Benjamini-Hochberg)."""
    alpha: float = 0.05
    """Family-wise error rate (holm) or false discovery rate (bh) of each arm and metric."""
    sort: str = "return"
    """Table order: the size of the change in return, level_complete, length or tv_distance."""
    random_directions: int = 0
    """Also sweep this many random unit directions of the basis's span, same arms and levels, as the
    baseline of how many directions "matter" (docs/analyses.md; 64 or more for a study)."""
    landing: int = 200
    """States kept per variant (a uniform sample of its steps) to measure how far edited states lie from the
    recorded ones in the full state space, against the baseline's (0: not measured)."""
    equivalence_margin: float = 0.5
    """TOST margin on return: a direction has "no effect" only where every on-data arm's change is shown
    to lie within +-this margin."""
    swaps: str = ""
    """Pairs of directions whose coordinates are exchanged at every step, each one more variant on the same
    levels (comma-separated I:J; a side named by a kind, saw:crate, is the direction that tracks proximity to
    it most strongly in the atlas of this basis) (docs/analyses.md)."""
    random_swaps: int = 0
    """The swaps' control: also swap this many random pairs of the basis's directions on the same levels, and
    report where each chosen swap's change falls among theirs (rank, empirical p-values, intervals;
    proclab.interpret.sweep.random_swaps; 20 or more for a claim)."""
    deaths: bool = True
    """In a game whose hazards are named (coinrun: saws, enemies, lava), report each variant's deaths by cause
    with paired CIs (keeps each episode's actions and replays the deaths; --no-deaths skips it)."""
    death_radius: float = RADIUS
    """A death's cause is the hazard nearest the agent on the step before the fatal one, when within this many world
    units of its box; farther, the cause is 'unclear'."""
    goals: bool = False
    """In a game with two goals (coinrun: the coin and the level's end; maze: the cheese and the top-right
    corner), whether each episode reached each, per variant against the baseline by the exact McNemar test
    (reads every slot's game state after every step: about 1.4x the play's time, hence off by default)."""
    parts: int = 1
    """Play the levels in this many blocks, each saved in ANALYSIS/sweep-parts/ once played: the same
    command run again plays only the blocks not yet saved (a sweep of hours resumes where it stopped), and
    the tests run when the last block is saved (docs/analyses.md)."""
    part: int | None = None
    """Play only block I of --parts (1-based), e.g. one process per core, each with its own I; whichever
    saves the last block writes the sweep's results."""
    workers: int = 1
    """Play the blocks of --parts in this many local processes at a time; the tests run once, here, when every
    block is saved (the results are those of the same sweep played in one process)."""
    ray_address: Annotated[str | None, tyro.conf.arg(aliases=("--ray",))] = None
    """Play the blocks of --parts as Ray tasks on this cluster (HOST:6379, auto; default: $RAY_ADDRESS, else
    locally); ANALYSIS must be a folder every node reads and writes. Needs pip install 'proclab[distributed]'."""
    cpus_per_part: float = 1
    """CPUs Ray reserves for each block (also its torch threads unless --torch-threads is given)."""

    def settings(self) -> SweepSettings:
        """The library's settings of this command line (the coordinates are the folder's system, ``--basis``,
        given to the grid as such: ``kind`` is the library's in-memory choice and unused here)."""
        return settings_from(self, SweepSettings, kind="ica")

    def check(self) -> None:
        check_system(self.basis)
        self.settings().check()


def run_sweep(args: SweepArgs, *, test: bool = True) -> Path:
    """Run the sweep on the analysis folder ``args.out``; returns its output folder (``ANALYSIS/sweep``,
    or ``ANALYSIS/sweep-<basis>``). With ``--parts`` and ``--workers`` or ``--ray``, the blocks not yet saved
    are played elsewhere first (:func:`spread`); ``test=False`` plays ``--part`` and saves it, untested."""
    start = time.perf_counter()
    args.check()
    ws = Workspace.open(args.out, create=False)
    coords = open_coordinates(ws, args.basis)
    checkpoint = agent_checkpoint(ws, args.agent, "analyze sweep")
    ws.require_inputs(checkpoint=checkpoint)
    rt = args.runtime()
    agent, env_config, _ = load_agent(checkpoint, rt)
    env_config = with_rule(env_config, args.level_rule)
    key = state_key(ws, agent, args.state)
    every = list(range(coords.k))
    directions = selected(args.directions, coords.k, every)
    pairs, picks = swap_pairs(ws, args, coords.k)
    rec = recorded(ws, coords, agent, key)
    states = recorded_states(ws) if args.random_directions or args.landing else None
    if args.random_directions:
        coords, rec = with_random(coords, rec, agent, key, args, states)
        every = list(range(coords.first))
        directions = (directions if args.directions else every) + list(range(coords.first, coords.k))
    files = read_level_states(args.levels_from) if args.levels_from is not None else None
    if files is not None:
        levels = np.arange(len(files))  # the file's states, in order
    else:
        levels = distinct_levels(agent_split(args.split, env_config.split), args.levels, args.seed)
    store = parts_store(ws, args, checkpoint, levels)
    if args.part is None and args.parts > 1 and (args.workers > 1 or tasks_of(args).address()):
        spread(args, store)
    episodes = len(levels) * (
        1 + len(directions) * len(parse_arms(args.arms)) + len(pairs) + args.random_swaps
    )
    env = ProcgenLevels(env_config, min(args.rows, episodes), args.seed, files)
    deaths = death_watch(env, args)
    goals = GoalWatch.of(env) if args.goals else None
    try:
        with phases(1, NAME) as ph, ph.phase(f"{episodes} episodes"):
            done = [0]

            def tick(n: int) -> None:
                done[0] += n
                ph.fraction(done[0], episodes)

            swept = sweep(
                agent,
                coords,
                key,
                rec,
                env,
                levels,
                directions,
                args.settings(),
                rt,
                tick,
                states,
                pairs,
                deaths,
                store,
                goals,
                test,
            )
    finally:
        env.close()
    if swept is None:
        print(f"{len(store.saved())} of {args.parts} parts saved in {store.folder}; play the others to test")
        return store.folder
    summary, out, variants = swept
    summary = {
        "format": FORMAT,
        "version": 1,
        "basis": args.basis,
        "basis_file": str(system_file(ws, args.basis)),
        "basis_digest": file_digest(system_file(ws, args.basis)),
        "state": key,
        "checkpoint": str(checkpoint),
        "game": env_config.games()[0],
        "mode": env_config.mode,
        "level_rule": env_config.level_rule if files is None else "",
        "split": args.split if files is None else None,
        "levels_from": None if files is None else str(args.levels_from),
        "recorded": {"source": str(ws.path / HIDDEN), "points": len(rec.values)},
        "device": str(rt.device),
        "precision": "bf16" if rt.bf16 else "fp32",
        "torch_threads": torch.get_num_threads(),
        **summary,
        "swaps_picked": picks,
    }
    return _write(ws, args, summary, out, variants, coords.label, start, deaths)


def tasks_of(args: SweepArgs) -> TaskSettings:
    """Where the blocks of ``--parts`` are played: ``--workers`` local processes or Ray tasks (``--ray``)."""
    return TaskSettings(args.workers, args.ray_address, args.cpus_per_part)


def spread(args: SweepArgs, store: Parts) -> None:
    """Play every block of ``store`` not yet saved as a unit of :func:`~proclab.run.parts.run_parts` (each
    :func:`play_part` saves its own, atomically); the first block that fails is raised once the others are
    done, so that a second run plays only what is still missing. A block's torch threads are
    ``--torch-threads``, else the CPUs it was given: they do not change its outcomes (``UNPLAYED``)."""
    where = tasks_of(args)
    threads = where.unit_threads(args.torch_threads)
    units = [
        (i, replace(args, part=i + 1, workers=1, ray_address=None, torch_threads=threads))
        for i in store.missing()
    ]
    run_parts(play_part, units, where, title=NAME, label=f"{len(units)} of {args.parts} parts")


def play_part(args: SweepArgs) -> None:
    """One block of a spread sweep (``args.part``), played and saved in this process, a spawned one or a
    Ray task."""
    run_sweep(args, test=False)


UNPLAYED = ("part", "torch_threads", "rows", "out", "workers", "ray_address", "cpus_per_part")
"""Options that do not change a sweep's outcomes: blocks played with different values of them merge."""


def parts_store(ws: Workspace, args: SweepArgs, checkpoint: Path, levels: np.ndarray) -> Parts:
    """Where the sweep's blocks are kept: ``ANALYSIS/sweep-parts/`` (a basis's own suffix) when played in
    parts, checked against the fingerprint of this sweep; memory for a sweep in one part."""
    if args.parts == 1:
        return Parts(1)
    # a sweep without --level-rule or --goals keeps the fingerprint it had before rules existed, so its parts resume
    fields = {k: v for k, v in asdict(args).items() if (k, v) not in (("level_rule", None), ("goals", False))}
    fingerprint = fingerprint_of(
        fields,
        UNPLAYED,
        basis_digest=file_digest(system_file(ws, args.basis)),
        checkpoint=checkpoint,
        levels=digest(np.asarray(levels, np.int64)),
    )
    return Parts(args.parts, ws.path / f"{NAME}{suffix(args.basis)}-parts", fingerprint)


def selected(text: str | None, k: int, every: list[int]) -> list[int]:
    """``--directions``: ids and ranges, ``none`` (only the baseline and the swaps), or every direction."""
    if text == "none":
        return []
    return parse_ids(text, k, "direction") if text else every


def swap_pairs(ws: Workspace, args: SweepArgs, k: int) -> tuple[list[tuple[int, int]], list[dict]]:
    """``--swaps`` as coordinate pairs, a kind looked up in the atlas of the swept basis (its current fit)."""
    folder = ws.path / ("atlas" + suffix(args.basis))
    return resolve(
        parse_swaps(args.swaps), k, lambda: read_atlas(folder, file_digest(system_file(ws, args.basis)))
    )


def death_watch(env: ProcgenLevels, args: SweepArgs) -> Deaths | None:
    """The watcher of deaths by cause, in a game whose hazards are named (none with ``--no-deaths``)."""
    game = env.config.games()[0]
    if not args.deaths or not glossary(game).hazards:
        return None
    return Deaths(env.replay, game, args.death_radius)


def recorded_states(ws: Workspace) -> np.ndarray:
    """The states ``analyze hidden`` analysed, rebuilt exactly from all their PCs in ``hidden.npz``."""
    with np.load(ws.path / HIDDEN) as f:
        return ws.basis().from_pcs(f["pcs"].astype(np.float64))


def with_random(coords, rec: Recorded, agent, key: str, args: SweepArgs, states: np.ndarray):
    """The basis with ``args.random_directions`` random directions appended, and the recorded distribution
    of their coordinates too: the projections of the recorded ``states`` and of the start state."""
    extended = WithRandom.draw(coords, args.random_directions, args.seed)
    start = agent.initial_state(1)[key].reshape(1, -1).double().cpu().numpy()
    values = np.concatenate([rec.values, extended.project(states)], axis=1)
    return extended, Recorded(values, np.concatenate([rec.start, extended.project(start)[0]]))


def _write(
    ws: Workspace, args: SweepArgs, summary: dict, out, variants, label: str, start: float, deaths
) -> Path:
    folder = ws.command_dir(NAME + suffix(args.basis))
    text = table_text(summary, label)
    files = [
        write_text_atomic(folder / "sweep_table.txt", text),
        write_text_atomic(folder / "sweep_table.csv", table_csv(summary, label)),
        figure(summary, label, folder / "sweep.png"),
    ]
    arrays = folder / "episodes.npz"
    tmp = folder / ".episodes.tmp.npz"
    np.savez(
        tmp,
        levels=np.asarray(summary["levels"]),
        direction=variants.direction,
        arm=np.asarray(variants.arm),
        held=variants.values,
        swap=variants.pair,
        ret=out.ret,
        level_complete=out.complete,
        length=out.length,
        actions=out.actions,
        timed_out=out.timed_out,
        **(
            {} if deaths is None else {"death_cause": deaths.cause, "death_causes": np.asarray(deaths.causes)}
        ),
    )
    tmp.replace(arrays)
    files.append(arrays)
    print(text, end="")
    if summary["warning"]:
        print(summary["warning"], file=sys.stderr)
    summary["seconds"] = round(time.perf_counter() - start, 3)
    write_json_atomic(folder / "sweep.json", summary)
    files.append(folder / "sweep.json")
    ws.record_command(
        NAME + suffix(args.basis),
        asdict(args),
        [str(f.relative_to(ws.path)) for f in files],
        summary["seconds"],
    )
    return ws.final(folder)
