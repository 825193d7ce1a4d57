"""Steering as a function: add a contrastive vector at a hook during real play; retarget by channels.

1. **Vector.** On the vector's levels (default: training levels) each level's first state with the
   the entity and without it (:mod:`proclab.interpret.steering.vectors`) give the steering vector at
   the hook: the mean activation difference, with minus without.
2. **Coefficients.** On the held-out levels held-out levels of the split, the agent plays once per
   coefficient (default ``-2,-1,0,1,2``) with ``coefficient * vector`` added at the
   hook at every step (coefficient 0 is the plain agent: adding zero is exact). All variants of a
   level start from the same game state (:mod:`proclab.interpret.interventions.batched_play`), so every
   outcome is compared with coefficient 0 *paired by level*: return, level completed (in games whose
   goal ends the level, e.g. maze's cheese: reaching the goal), steps; episode-bootstrap intervals.
3. **Retargeting** (``channels``, e.g. the channels ``analyze probe --entity`` found tracking the
   entity): per held-out level a target cell (a random target-cell kind cell at least 2 cells from the
   agent's start) is written into those channels at its position in the map, at each channel's largest
   activation on the vector's frames times ``magnitude``; the control writes the same into as many
   random other channels. Outcome: how often the agent's centre reaches the target cell, each arm against the plain agent and
   the tracking channels against the random ones, paired by level.

Per coefficient, ``reach`` says for each kind of the game's glossary present at the start of some
held-out level how often the agent reached it on those levels (its box within ``reach_gap`` of one,
:class:`~proclab.interpret.steering.reach.Near`; the goal also by completing the level), paired with
coefficient 0 over the same levels.

:func:`steer` plays any agent in memory (:class:`SteerSettings` are ``proclab analyze steer``'s options)
and returns a :class:`Steering` result; the command is parse -> call -> write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from proclab.envs import parse_split
from proclab.envs.state import glossary
from proclab.errors import ProclabError
from proclab.interpret.interventions.batched_play import ProcgenLevels, paired_levels, play
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
from proclab.interpret.workspace.progress import no_phase
from proclab.io.results import Result
from proclab.levels.file import LevelStates
from proclab.models.hooks import capture, device_of
from proclab.models.interventions import Intervened, hook_shapes
from proclab.run.runtime import Runtime, make_runtime


@dataclass(frozen=True)
class SteerSettings:
    """What :func:`steer` plays (the options of ``proclab analyze steer``, same names and meanings)."""

    hook: str = "torso.block1.hook_out"
    entity: str | None = None  # default: the game's goal kind
    vector_levels: str = "0:200"
    split: str = "test1"
    levels: int = 200
    coefficients: tuple[float, ...] = (-2.0, -1.0, 0.0, 1.0, 2.0)
    per_level: bool = False
    channels: tuple[int, ...] = ()
    magnitude: float = 1.0
    reach_gap: float = 0.5
    target_cell: str = "space"
    greedy: bool = True
    rows: int = 64
    bootstrap: int = 2000
    seed: int = 0


@dataclass(frozen=True)
class Steering(Result):
    """The steering vector and, per coefficient (and per retargeting arm), the paired outcomes against the
    plain agent (module docstring)."""

    hook: str
    entity: str
    game: str
    levels: int
    vector_info: dict
    coefficients: dict
    vector: np.ndarray = field(repr=False)
    per_level: dict | None = None
    retarget: dict | None = None

    def table(self) -> list[dict]:
        rows = []
        for label, by in (
            ("mean vector", self.coefficients),
            ("per-level vectors", (self.per_level or {}).get("coefficients", {})),
        ):
            for c, r in by.items():
                lc = r["level_complete"]
                rows.append({
                    "vector": label,
                    "coefficient": float(c),
                    "completed": lc["intervened"],
                    "change": lc["change"],
                    "ci": tuple(lc["ci95"]),
                    "return change": r["return"]["change"],
                })  # fmt: skip
        return rows


def steer(
    agent,
    settings: SteerSettings = SteerSettings(),
    *,
    level_states: LevelStates | None = None,
    runtime: Runtime | None = None,
    phase=None,
) -> Steering:
    """Build the vector on ``settings.vector_levels`` and play ``agent`` steered on held-out levels (or on
    ``level_states``, each once per variant); ``phase(name)`` (a context manager) reports progress."""
    s = settings
    for name in ("levels", "rows", "bootstrap"):
        if getattr(s, name) < 1:
            raise ProclabError(f"--{name} must be >= 1, got {getattr(s, name)}")
    coefficients = check_coefficients(s.coefficients)
    rt = runtime or getattr(agent, "runtime", None) or make_runtime("cpu", "fp32")
    env_config = agent.env_config
    game = env_config.games()[0]
    entity = s.entity or _goal(game)
    vector_split = parse_split(s.vector_levels)
    if not vector_split.bounded:
        raise ProclabError(f"--vector-levels {s.vector_levels!r}: name a bounded set of levels, e.g. 0:200")
    if level_states is not None:
        levels = np.arange(len(level_states))  # the file's states, in order
    else:
        levels = paired_levels(parse_split(s.split), s.levels, s.seed)
    phase = phase or no_phase
    env = ProcgenLevels(env_config, s.rows, s.seed, level_states)
    seeds = env if level_states is None else ProcgenLevels(env_config, s.rows, s.seed)  # the vector's levels
    try:
        with phase(f"vector from {vector_split.label()}"):
            vector, frames, info = _vector(agent, s.hook, seeds, vector_split, entity)
        with phase(f"coefficients on {len(levels)} levels"):
            by_coefficient = _coefficients(agent, vector, coefficients, env, levels, s, rt)
        per_level = retarget = None
        if s.per_level:
            with phase(f"per-level vectors on {len(levels)} levels"):
                per_level = _per_level(agent, coefficients, env, levels, entity, s, rt)
        if s.channels:
            with phase(f"retargeting on {len(levels)} levels"):
                retarget = _retarget(agent, frames, env, levels, s, rt)
    finally:
        env.close()
        if seeds is not env:
            seeds.close()
    return Steering(
        s.hook, entity, game, len(levels), info, by_coefficient, vector.numpy(), per_level, retarget
    )


def check_coefficients(values: Sequence[float]) -> np.ndarray:
    """The coefficients, sorted and unique; 0 (the plain agent, the baseline) must be among them."""
    values = np.unique(np.asarray(values, dtype=np.float64))
    if 0.0 not in values:
        raise ProclabError(f"coefficients {list(values)} must include 0 (the plain agent, the baseline)")
    return values


def paired_outcomes(out, base: int, arm: int, idx: np.ndarray) -> dict:
    """Return, level completed and steps of variant ``arm`` against variant ``base``, paired by level."""
    return {
        "return": mean_change(out.ret[base], out.ret[arm], idx),
        "level_complete": mean_change(out.complete[base], out.complete[arm], idx),
        "length": mean_change(out.length[base], out.length[arm], idx),
    }


def _goal(game: str) -> str:

    goal = glossary(game).goal
    if goal is None:
        raise ProclabError(f"{game} has no goal kind; name the entity with --entity")
    return goal


def _vector(agent, hook, env, split, entity):

    states = [env.level_state(int(lv)) for lv in range(split.start, split.start + split.num)]
    with_entity, without_entity = without(states, entity)
    frames = first_frames(env, with_entity)
    vector = contrast_vector(agent, hook, frames, first_frames(env, without_entity))
    info = {"levels": split.label(), "pairs": len(with_entity), "norm": float(vector.norm())}
    return vector, frames, info


def _coefficients(agent, vector, coefficients, env, levels, s, rt) -> dict:

    plan = variants_plan(s.hook, hook_shapes(agent)[s.hook], [AddVector(vector)])
    dims = np.zeros(len(coefficients), np.int64)
    values = np.repeat(coefficients[:, None], len(levels), 1)
    near = _near(env, len(coefficients), len(levels), s.reach_gap)
    outcomes = play(
        Intervened(agent), plan, env, levels, dims, values, rt, greedy=s.greedy, seed=s.seed, watch=near
    )
    return _report(outcomes, near, env, levels, coefficients, s)


def _near(env, variants: int, levels: int, gap: float) -> Near:
    return Near(lambda: env.env.get_state()["procgen"][0], env.config.games()[0], variants, levels, gap)


def _report(outcomes, near: Near, env, levels, coefficients, s) -> dict:
    """Per coefficient: the paired outcomes against coefficient 0, and ``reach``: per kind present at
    the start of some level, the share of those levels on which the agent reached it (paired over them)."""

    idx = resamples(len(levels), s.bootstrap, s.seed)
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
        sub_idx = resamples(len(have), s.bootstrap, s.seed)
        for v, c in enumerate(coefficients):
            row = out[f"{c:g}"].setdefault("reach", {})
            row[kind] = {"levels": len(have), **mean_change(sub[base], sub[v], sub_idx)}
    return out


def _per_level(agent, coefficients, env, levels, entity, s, rt) -> dict:
    """Each level steered by its own with-minus-without vector, one variant per coefficient."""

    states = [env.level_state(int(lv)) for lv in levels]
    vectors, have = level_vectors(agent, s.hook, states, entity, lambda s: first_frames(env, s))
    variants = [AddLevelVector(vectors, float(c)) for c in coefficients]
    plan = variants_plan(s.hook, hook_shapes(agent)[s.hook], variants)
    values = np.repeat(np.arange(len(levels), dtype=np.float64)[None], len(coefficients), 0)
    near = _near(env, len(coefficients), len(levels), s.reach_gap)
    dims = np.arange(len(coefficients))
    outcomes = play(
        Intervened(agent), plan, env, levels, dims, values, rt, greedy=s.greedy, seed=s.seed, watch=near
    )
    out = _report(outcomes, near, env, levels, coefficients, s)
    return {"levels_with_entity": int(have.sum()), "coefficients": out}


def _retarget(agent, frames, env, levels, s, rt) -> dict:

    shape = hook_shapes(agent)[s.hook]
    if len(shape) != 3:
        raise ProclabError(f"--channels needs a conv map; {s.hook} has per-sample shape {shape}")
    others = np.setdiff1d(np.arange(shape[0]), s.channels)
    if len(others) < len(s.channels):
        raise ProclabError(f"--channels: too few other channels at {s.hook} for the random control")
    control = tuple(int(c) for c in np.random.default_rng([s.seed, 5]).choice(others, len(s.channels), False))
    peak = s.magnitude * _peaks(agent, s.hook, frames, shape)
    arms = {"tracking": tuple(s.channels), "random": control}
    variants = [WriteSites(ch, tuple(float(peak[c]) for c in ch)) for ch in arms.values()]
    states = [env.level_state(int(lv)) for lv in levels]
    targets = target_cells(states, s.target_cell, s.seed)
    sites = map_sites(states, targets, shape).astype(np.float64)
    dims = np.array([-1, 0, 1])
    reach = Reach(lambda: env.env.get_state()["procgen"][0], targets, 3)
    play(
        Intervened(agent),
        variants_plan(s.hook, shape, variants),
        env,
        levels,
        dims,
        np.repeat(sites[None], 3, 0),
        rt,
        greedy=s.greedy,
        seed=s.seed,
        watch=reach,
    )
    hit = reach.hit.astype(np.float64)
    idx = resamples(len(levels), s.bootstrap, s.seed)
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
