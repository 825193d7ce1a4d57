"""``proclab analyze steer``: add a contrastive vector at a hook during real play; retarget by channels.

1. **Vector.** On ``--vector-levels`` (default: training levels) each level's first state with the
   ``--entity`` and without it (:mod:`proclab.interpret.steering.vectors`) give the steering vector at
   ``--hook``: the mean activation difference, with minus without.
2. **Coefficients.** On ``--levels`` held-out levels of ``--split``, the agent plays once per
   coefficient (``--coefficients``, default ``-2,-1,0,1,2``) with ``coefficient * vector`` added at the
   hook at every step (coefficient 0 is the plain agent: adding zero is exact). All variants of a
   level start from the same game state (:mod:`proclab.interpret.interventions.batched_play`), so every
   outcome is compared with coefficient 0 *paired by level*: return, level completed (in games whose
   goal ends the level, e.g. maze's cheese: reaching the goal), steps; episode-bootstrap intervals.
3. **Retargeting** (``--channels``, e.g. the channels ``analyze probe --entity`` found tracking the
   entity): per held-out level a target cell (a random ``--target-cell`` cell at least 2 cells from the
   agent's start) is written into those channels at its position in the map, at each channel's largest
   activation on the vector's frames times ``--magnitude``; the control writes the same into as many
   random other channels. Outcome: how often the agent's centre reaches the target cell, each arm against the plain agent and
   the tracking channels against the random ones, paired by level.

Per coefficient, ``reach`` says for each kind of the game's glossary present at the start of some
held-out level how often the agent reached it on those levels (its box within ``--reach-gap`` of one,
:class:`~proclab.interpret.steering.reach.Near`; the goal also by completing the level), paired with
coefficient 0 over the same levels.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from proclab.envs import parse_split
from proclab.envs.state import glossary
from proclab.errors import ProclabError
from proclab.interpret.interventions.batched_play import ProcgenLevels, paired_levels, play
from proclab.interpret.interventions.edit_target import agent_checkpoint
from proclab.interpret.stats.paired import mean_change, resamples
from proclab.interpret.steering.reach import Near, Reach
from proclab.interpret.steering.variants import AddLevelVector, AddVector, WriteSites, variants_plan
from proclab.interpret.steering.vectors import (
    contrast_vector,
    first_frames,
    kinds_present,
    level_vectors,
    map_sites,
    target_cells,
    without,
)
from proclab.interpret.workspace.args import AGENT, AnalysisArgs
from proclab.interpret.workspace.folder import Workspace
from proclab.interpret.workspace.progress import phases
from proclab.io.run_dirs import write_json_atomic
from proclab.levels.file import read_level_states
from proclab.models.hooks import capture, device_of
from proclab.models.interventions import Intervened, hook_shapes
from proclab.models.loading import load_agent

NAME = "steer"


@dataclass(frozen=True)
class SteerArgs(AnalysisArgs):
    """Steer: a vector from levels with and without an entity, added at a hook while playing held-out levels."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"levels": 20, "vector_levels": "0:20"}}

    seed: int = 0
    """Seed of the held-out levels drawn from --split, the envs, sampled actions (--no-greedy), the
    retargeting's control channels and target cells, and the bootstrap."""
    precision: str = field(default="auto", kw_only=True)
    """The agent's arithmetic while it plays: fp32, bf16 (autocast) or auto (bf16 where the hardware computes
    it natively). Every coefficient plays at the same precision, so the comparisons stay paired; the vector
    itself is measured in fp32."""
    agent: AGENT = None
    """Agent played: a proclab run or checkpoint directory (default: the folder's, else the one that
    recorded its data)."""
    hook: str = "torso.block1.hook_out"
    """Hook point the vector is added at (any of the agent's)."""
    entity: str | None = None
    """Kind removed to make the contrastive pairs (default: the game's goal, e.g. maze's cheese)."""
    vector_levels: str = "0:200"
    """Levels whose with/without pairs make the vector (START:NUM or a split name; default training levels)."""
    split: str = "test1"
    """Held-out levels played (named split or START:NUM)."""
    levels: int = 200
    """Held-out levels, each played once per coefficient (and per retargeting arm)."""
    levels_from: Path | None = None
    """Play the states of this level-state file as the held-out levels (each once per variant; --levels
    and --split unused): edited levels (proclab level edit) or recorded ones (level export). The vector
    is still built from --vector-levels."""
    coefficients: str = "-2,-1,0,1,2"
    """Coefficients of the vector (0 is the plain agent, the baseline of the paired comparisons)."""
    per_level: bool = False
    """Also steer each held-out level with its own vector (that level with minus without the entity, as
    Mini et al. did; levels without the entity get none)."""
    channels: tuple[int, ...] = ()
    """Retargeting: channels of the hook's map that track the entity (none: no retargeting)."""
    magnitude: float = 1.0
    """Retargeting: the value written, as a multiple of each channel's largest activation on the vector's
    frames (Mini et al. wrote values far above a channel's range)."""
    reach_gap: float = 0.5
    """Per-kind reach: a kind counts as reached on a level when the agent's box came within this many
    world units of one (the touch that ends an episode is never seen, only the approach; the goal is
    also reached when the level is completed)."""
    target_cell: str = "space"
    """Retargeting: the kind of cell a target is drawn from."""
    greedy: bool = True
    """Most likely action (--no-greedy samples with the same noise in every variant of a level)."""
    rows: int = 64
    """Episodes stepped together."""
    bootstrap: int = 2000
    """Bootstrap resamples of the paired CIs."""


def parse_coefficients(text: str) -> np.ndarray:
    try:
        values = np.array([float(v) for v in text.split(",") if v.strip()])
    except ValueError:
        raise ProclabError(
            f"--coefficients {text!r}: expected numbers separated by commas, e.g. -2,-1,0,1,2"
        ) from None
    if 0.0 not in values:
        raise ProclabError(f"--coefficients {text!r} must include 0 (the plain agent, the baseline)")
    return np.unique(values)


def paired_outcomes(out, base: int, arm: int, idx: np.ndarray) -> dict:
    """Return, level completed and steps of variant ``arm`` against variant ``base``, paired by level."""
    return {
        "return": mean_change(out.ret[base], out.ret[arm], idx),
        "level_complete": mean_change(out.complete[base], out.complete[arm], idx),
        "length": mean_change(out.length[base], out.length[arm], idx),
    }


def run_steer(args: SteerArgs) -> Path:

    start = time.time()
    args.require_positive("levels", "rows", "bootstrap")
    coefficients = parse_coefficients(args.coefficients)
    ws = Workspace.open(args.out)
    checkpoint = agent_checkpoint(ws, args.agent, "analyze steer")
    ws.require_inputs(checkpoint=checkpoint)
    rt = args.runtime()
    agent, env_config, _ = load_agent(checkpoint, rt)
    game = env_config.games()[0]
    entity = args.entity or _goal(game)
    vector_split = parse_split(args.vector_levels)
    if not vector_split.bounded:
        raise ProclabError(
            f"--vector-levels {args.vector_levels!r}: name a bounded set of levels, e.g. 0:200"
        )
    files = read_level_states(args.levels_from) if args.levels_from is not None else None
    if files is not None:
        levels = np.arange(len(files))  # the file's states, in order
    else:
        levels = paired_levels(parse_split(args.split), args.levels, args.seed)
    out = ws.command_dir(NAME)
    env = ProcgenLevels(env_config, args.rows, args.seed, files)
    seeds = env if files is None else ProcgenLevels(env_config, args.rows, args.seed)  # the vector's levels
    summary: dict = {"hook": args.hook, "entity": entity, "checkpoint": str(checkpoint), "game": game}
    summary["levels"] = len(levels)
    summary["levels_from"] = None if files is None else str(args.levels_from)
    try:
        with phases(2 + bool(args.channels) + args.per_level, NAME) as ph:
            with ph.phase(f"vector from {vector_split.label()}"):
                vector, frames = _vector(agent, args.hook, seeds, vector_split, entity, summary)
            torch.save(vector, out / "vector.pt")
            with ph.phase(f"coefficients on {len(levels)} levels"):
                summary["coefficients"] = _coefficients(agent, vector, coefficients, env, levels, args, rt)
            if args.per_level:
                with ph.phase(f"per-level vectors on {len(levels)} levels"):
                    summary["per_level"] = _per_level(agent, coefficients, env, levels, entity, args, rt)
            if args.channels:
                with ph.phase(f"retargeting on {len(levels)} levels"):
                    summary["retarget"] = _retarget(agent, frames, env, levels, args, rt)
    finally:
        env.close()
        if seeds is not env:
            seeds.close()
    summary["seconds"] = round(time.time() - start, 3)
    write_json_atomic(out / "summary.json", summary)
    _print(summary)
    ws.record_command(
        NAME, asdict(args), [str(out / "summary.json"), str(out / "vector.pt")], time.time() - start
    )
    return ws.final(out)


def _goal(game: str) -> str:

    goal = glossary(game).goal
    if goal is None:
        raise ProclabError(f"{game} has no goal kind; name the entity with --entity")
    return goal


def _vector(agent, hook, env, split, entity, summary):

    states = [env.level_state(int(lv)) for lv in range(split.start, split.start + split.num)]
    with_entity, without_entity = without(states, entity)
    frames = first_frames(env, with_entity)
    vector = contrast_vector(agent, hook, frames, first_frames(env, without_entity))
    summary["vector"] = {"levels": split.label(), "pairs": len(with_entity), "norm": float(vector.norm())}
    return vector, frames


def _coefficients(agent, vector, coefficients, env, levels, args, rt) -> dict:

    plan = variants_plan(args.hook, hook_shapes(agent)[args.hook], [AddVector(vector)])
    dims = np.zeros(len(coefficients), np.int64)
    values = np.repeat(coefficients[:, None], len(levels), 1)
    near = _near(env, len(coefficients), len(levels), args.reach_gap)
    outcomes = play(
        Intervened(agent), plan, env, levels, dims, values, rt, greedy=args.greedy, seed=args.seed, watch=near
    )
    return _report(outcomes, near, env, levels, coefficients, args)


def _near(env, variants: int, levels: int, gap: float) -> Near:
    return Near(lambda: env.env.get_state()["procgen"][0], env.config.games()[0], variants, levels, gap)


def _report(outcomes, near: Near, env, levels, coefficients, args) -> dict:
    """Per coefficient: the paired outcomes against coefficient 0, and ``reach``: per kind present at
    the start of some level, the share of those levels on which the agent reached it (paired over them)."""

    idx = resamples(len(levels), args.bootstrap, args.seed)
    base = int(np.flatnonzero(coefficients == 0)[0])
    out = {f"{c:g}": paired_outcomes(outcomes, base, v, idx) for v, c in enumerate(coefficients)}
    present = kinds_present([env.level_state(int(lv)) for lv in levels], near.kinds)
    goal = glossary(env.config.games()[0]).goal
    for k, kind in enumerate(near.kinds):
        have = np.flatnonzero(present[:, k])
        if not len(have):
            continue  # the game's kind appears on none of these levels
        reached = near.reached[:, :, k] | ((outcomes.complete > 0) if kind == goal else False)
        sub = reached[:, have].astype(np.float64)
        sub_idx = resamples(len(have), args.bootstrap, args.seed)
        for v, c in enumerate(coefficients):
            row = out[f"{c:g}"].setdefault("reach", {})
            row[kind] = {"levels": len(have), **mean_change(sub[base], sub[v], sub_idx)}
    return out


def _per_level(agent, coefficients, env, levels, entity, args, rt) -> dict:
    """Each level steered by its own with-minus-without vector, one variant per coefficient."""

    states = [env.level_state(int(lv)) for lv in levels]
    vectors, have = level_vectors(agent, args.hook, states, entity, lambda s: first_frames(env, s))
    variants = [AddLevelVector(vectors, float(c)) for c in coefficients]
    plan = variants_plan(args.hook, hook_shapes(agent)[args.hook], variants)
    values = np.repeat(np.arange(len(levels), dtype=np.float64)[None], len(coefficients), 0)
    near = _near(env, len(coefficients), len(levels), args.reach_gap)
    dims = np.arange(len(coefficients))
    outcomes = play(
        Intervened(agent), plan, env, levels, dims, values, rt, greedy=args.greedy, seed=args.seed, watch=near
    )
    out = _report(outcomes, near, env, levels, coefficients, args)
    return {"levels_with_entity": int(have.sum()), "coefficients": out}


def _retarget(agent, frames, env, levels, args, rt) -> dict:

    shape = hook_shapes(agent)[args.hook]
    if len(shape) != 3:
        raise ProclabError(f"--channels needs a conv map; {args.hook} has per-sample shape {shape}")
    others = np.setdiff1d(np.arange(shape[0]), args.channels)
    if len(others) < len(args.channels):
        raise ProclabError(f"--channels: too few other channels at {args.hook} for the random control")
    control = tuple(
        int(c) for c in np.random.default_rng([args.seed, 5]).choice(others, len(args.channels), False)
    )
    peak = args.magnitude * _peaks(agent, args.hook, frames, shape)
    arms = {"tracking": tuple(args.channels), "random": control}
    variants = [WriteSites(ch, tuple(float(peak[c]) for c in ch)) for ch in arms.values()]
    states = [env.level_state(int(lv)) for lv in levels]
    targets = target_cells(states, args.target_cell, args.seed)
    sites = map_sites(states, targets, shape).astype(np.float64)
    dims = np.array([-1, 0, 1])
    reach = Reach(lambda: env.env.get_state()["procgen"][0], targets, 3)
    play(
        Intervened(agent),
        variants_plan(args.hook, shape, variants),
        env,
        levels,
        dims,
        np.repeat(sites[None], 3, 0),
        rt,
        greedy=args.greedy,
        seed=args.seed,
        watch=reach,
    )
    hit = reach.hit.astype(np.float64)
    idx = resamples(len(levels), args.bootstrap, args.seed)
    return {
        "channels": arms,
        "magnitudes": {c: float(peak[c]) for ch in arms.values() for c in ch},
        "reached": {
            "plain": float(hit[0].mean()),
            "tracking": float(hit[1].mean()),
            "random": float(hit[2].mean()),
        },
        "tracking_vs_plain": mean_change(hit[0], hit[1], idx),
        "random_vs_plain": mean_change(hit[0], hit[2], idx),
        "tracking_vs_random": mean_change(hit[2], hit[1], idx),
    }


def _peaks(agent, hook, frames, shape) -> np.ndarray:
    """Each channel's largest activation over the vector's frames (the magnitude a target is written with)."""

    dev = device_of(agent)
    obs = torch.as_tensor(frames[:256], device=dev)
    prev = torch.zeros(len(obs), device=dev) if agent.config.prev_reward else None
    first = torch.ones(len(obs), dtype=torch.bool, device=dev)
    with torch.inference_mode(), capture(agent, hook, detach=True) as acts:
        agent.step(obs, agent.initial_state(len(obs), device=dev), first, prev)
    return acts[hook].reshape(len(obs), *shape).amax((0, 2, 3)).float().cpu().numpy()


def _print(summary: dict) -> None:
    rows = [("mean vector", summary["coefficients"])]
    if "per_level" in summary:
        rows.append(("per-level vectors", summary["per_level"]["coefficients"]))
    for label, by_coefficient in rows:
        for c, r in by_coefficient.items():
            lc = r["level_complete"]
            print(
                f"{label}, coefficient {c:>5}: level completed {lc['intervened']:.3f} (change {lc['change']:+.3f} "
                f"[{lc['ci95'][0]:+.3f}, {lc['ci95'][1]:+.3f}]), return change {r['return']['change']:+.3f}"
            )
            for kind, k in r.get("reach", {}).items():
                print(
                    f"    reached {kind} on {k['intervened']:.3f} of {k['levels']} levels (change "
                    f"{k['change']:+.3f} [{k['ci95'][0]:+.3f}, {k['ci95'][1]:+.3f}])"
                )
    if "retarget" in summary:
        r = summary["retarget"]
        d = r["tracking_vs_random"]
        print(
            f"retargeting: reached the target {r['reached']['tracking']:.3f} (tracking channels) vs "
            f"{r['reached']['random']:.3f} (random) vs {r['reached']['plain']:.3f} (plain); "
            f"difference {d['change']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"
        )
