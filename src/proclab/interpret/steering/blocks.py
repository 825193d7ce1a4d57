"""Steering played in blocks of levels: what one block plays, and the blocks merged in level order.

Everything :func:`~proclab.interpret.steering.steer.steer` plays is per level: every arm of a level (each
coefficient of the vector, its instance control, its random draws) starts from the level's first state,
sampled actions are keyed by (seed, level, step) and the plain agent's walk without the entity is played level
by level too. What is drawn for several levels at once (the held-out levels, the vectors and their controls,
the retargeting's targets and channel sets) is drawn before the split, by the caller, for all levels; so a
block plays, on its levels, exactly the episodes the whole steering plays there. The statistics (paired
intervals, McNemar tests, the correction over all of them) need every level, and run once on the merged
blocks. Hence ``parts`` blocks give the numbers of one block, bit for bit, wherever each block was played.

A block (:class:`Block`) carries what it needs to be played alone, in this process, a spawned one or a Ray
task (:func:`play_block`), and returns plain arrays (:class:`Played`), which
:class:`~proclab.run.parts.Parts` keeps or saves as they arrive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from proclab.envs import EnvConfig
from proclab.envs.state import goal_names, parse_state, remove_entities, serialize_state
from proclab.interpret.interventions.batched_play import Outcomes, ProcgenLevels, play
from proclab.interpret.interventions.goal_watch import GoalWatch
from proclab.interpret.steering.reach import Near, Paths, Reach
from proclab.interpret.steering.variants import AddLevelVector, WriteSites, variants_plan
from proclab.levels.file import LevelStates
from proclab.models.edited import AgentLike, Intervened, hook_shapes
from proclab.run.parts import joined
from proclab.run.runtime import Runtime

if TYPE_CHECKING:
    from proclab.interpret.steering.steer import SteerSettings

Cells = list[list[list[tuple[int, int]]]]
"""``cells[v][l]``: the grid cells variant ``v``'s walk on level ``l`` stood on (:class:`Paths`)."""


@dataclass(frozen=True)
class Arms:
    """Per-level vectors ``(L, *shape)`` of the steering vector, its random draws ``(D, L, *shape)`` and its
    instance control."""

    vector: torch.Tensor
    random: torch.Tensor
    instance: torch.Tensor
    have: np.ndarray  # levels that hold the entity

    def rows(self, block: np.ndarray) -> Arms:
        """The arms of the levels ``block`` (indices), copied: a block travels without the other levels'."""
        at = torch.as_tensor(block)
        return Arms(
            self.vector[at].clone(), self.random[:, at].clone(), self.instance[at].clone(), self.have[block]
        )


def layout_of(coefficients: np.ndarray, draws: int) -> tuple[list[float], dict[tuple[str, float], int]]:
    """The non-zero coefficients and ``layout[(label, c)]``: the variant of each arm (``vector``, ``instance``,
    ``random D``) at coefficient ``c`` in the outcomes (0 is the plain agent)."""
    steered = [float(c) for c in coefficients if c != 0]
    labels = ["vector", "instance", *(f"random {d}" for d in range(draws))]
    layout = {
        (label, c): 1 + i * len(labels) + j for i, c in enumerate(steered) for j, label in enumerate(labels)
    }
    return steered, layout


@dataclass(frozen=True)
class Writes:
    """Retargeting's writes (:func:`~proclab.interpret.steering.steer.steer`, ``channels``): each arm's channels
    (the tracking set first, then the random sets) and magnitudes, and per level the target's world centre
    ``(L, 2)`` and its flat map index ``(L,)``."""

    arms: tuple[tuple[int, ...], ...]
    magnitudes: tuple[tuple[float, ...], ...]
    targets: np.ndarray
    sites: np.ndarray

    def rows(self, block: np.ndarray) -> Writes:
        return Writes(self.arms, self.magnitudes, self.targets[block], self.sites[block])


@dataclass(frozen=True)
class Block:
    """One block of levels, with everything it needs to be played alone (module docstring)."""

    agent: AgentLike
    hook: str
    env_config: EnvConfig
    level_states: LevelStates | None
    levels: np.ndarray
    """The block's levels: seeds, or indices of ``level_states``."""
    arms: Arms
    coefficients: np.ndarray
    entity: str
    settings: SteerSettings
    runtime: Runtime
    writes: Writes | None = None


@dataclass(frozen=True)
class Played:
    """What a block (or all of them, merged) played, per variant ``v`` and level ``l``: the outcomes, the
    kinds each came near (``(V, L, K)``), the walks, both goals (``(2, V, L)``, None in a game without them),
    the plain agent's walks without the entity (None when no coefficient steers) and retargeting's
    ``hit`` (``(1 + sets, L)``, None without it)."""

    outcomes: Outcomes
    near: np.ndarray
    cells: Cells
    goals: np.ndarray | None = None
    blind: Cells | None = None
    hit: np.ndarray | None = None

    def arrays(self) -> dict[str, np.ndarray]:
        out = {**self.outcomes.arrays(), "near": self.near, **_packed("cells", self.cells)}
        if self.goals is not None:
            out["goals"] = self.goals
        if self.blind is not None:
            out.update(_packed("blind", self.blind))
        if self.hit is not None:
            out["hit"] = self.hit
        return out

    @classmethod
    def of_arrays(cls, f: dict[str, np.ndarray]) -> Played:
        return cls(
            Outcomes.of_arrays(f),
            f["near"],
            _unpacked(f, "cells"),
            f.get("goals"),
            _unpacked(f, "blind") if "blind_counts" in f else None,
            f.get("hit"),
        )

    @classmethod
    def concatenate(cls, blocks: list[Played]) -> Played:
        """The blocks as one play of all their levels, in block order."""

        def levels(cells: list[Cells]) -> Cells:
            return [[walk for c in cells for walk in c[v]] for v in range(len(cells[0]))]

        return cls(
            Outcomes.concatenate([b.outcomes for b in blocks]),
            np.concatenate([b.near for b in blocks], axis=1),
            levels([b.cells for b in blocks]),
            joined([b.goals for b in blocks], lambda goals: np.concatenate(goals, axis=2)),
            joined([b.blind for b in blocks], levels),
            joined([b.hit for b in blocks], lambda hits: np.concatenate(hits, axis=1)),
        )


def _packed(name: str, cells: Cells) -> dict[str, np.ndarray]:
    """Walks as two arrays: every cell ``(N, 2)`` in (variant, level, step) order and the steps of each walk."""
    counts = np.array([[len(walk) for walk in by_level] for by_level in cells], np.int64)
    flat = [cell for by_level in cells for walk in by_level for cell in walk]
    return {f"{name}_cells": np.array(flat, np.int64).reshape(-1, 2), f"{name}_counts": counts}


def _unpacked(f: dict[str, np.ndarray], name: str) -> Cells:
    counts, flat = f[f"{name}_counts"], f[f"{name}_cells"]
    ends = np.cumsum(counts.ravel())
    walks = [
        [(int(x), int(y)) for x, y in flat[end - n : end]]
        for n, end in zip(counts.ravel(), ends, strict=True)
    ]
    levels = counts.shape[1]
    return [walks[v * levels : (v + 1) * levels] for v in range(counts.shape[0])]


def play_block(block: Block) -> dict[str, np.ndarray]:
    """Play ``block``'s levels (module docstring): every arm, the plain agent without the entity and
    retargeting's writes; what it played as arrays (:meth:`Played.arrays`)."""
    s = block.settings
    env = ProcgenLevels(block.env_config, s.rows, s.seed, block.level_states)
    try:
        played = _arms_played(block, env)
        if block.writes is not None:
            played = _with_hits(played, block, env)
    finally:
        env.close()
    return played.arrays()


def _arms_played(block: Block, env: ProcgenLevels) -> Played:
    """Every arm on every level of the block, and the plain agent on each level without the entity."""
    s, rt, agent, levels, arms = block.settings, block.runtime, block.agent, block.levels, block.arms
    steered, _ = layout_of(block.coefficients, len(arms.random))
    variants = [  # in the order of the layout
        AddLevelVector(vectors, c)
        for c in steered
        for vectors in (arms.vector, arms.instance, *(arms.random[d] for d in range(len(arms.random))))
    ]
    V, L = len(variants) + 1, len(levels)
    plan = variants_plan(block.hook, hook_shapes(agent)[block.hook], variants) if variants else None
    dims = np.arange(-1, len(variants))
    values = np.repeat(np.arange(L, dtype=np.float64)[None], V, 0)
    game = env.config.games()[0]
    states = _StepStates(env)
    near = Near(states, game, V, L, s.reach_gap)
    paths = Paths(states, V, L)
    tracked = GoalWatch(states, env.level_state, game).start(V, levels) if goal_names(game) else None
    outcomes = play(
        Intervened(agent), plan, env, levels, dims, values, rt, greedy=s.greedy, seed=s.seed,
        watch=lambda *a: (states.next_step(), near(*a), paths(*a), tracked and tracked(*a)),
    )  # fmt: skip
    goals = None if tracked is None else tracked.outcomes(outcomes.complete)
    blind = _without_entity(agent, env, levels, block.entity, s, rt).cells if steered else None
    return Played(outcomes, near.reached, paths.cells, goals, blind)


def _with_hits(played: Played, block: Block, env: ProcgenLevels) -> Played:
    """Retargeting on the block's levels: whether each arm's write got the agent's centre to the target."""
    w, s = block.writes, block.settings
    assert w is not None
    shape = hook_shapes(block.agent)[block.hook]
    variants = [WriteSites(ch, m) for ch, m in zip(w.arms, w.magnitudes, strict=True)]
    V = len(variants) + 1
    reach = Reach(_states_of(env), w.targets, V)
    play(
        Intervened(block.agent), variants_plan(block.hook, shape, variants), env, block.levels,
        np.arange(-1, len(variants)), np.repeat(w.sites.astype(np.float64)[None], V, 0), block.runtime,
        greedy=s.greedy, seed=s.seed, watch=reach,
    )  # fmt: skip
    return Played(played.outcomes, played.near, played.cells, played.goals, played.blind, reach.hit)


def _states_of(env):
    """Every slot's game state now (one game: the vector env's slots in order, through its reused buffer)."""
    return env.env.slot_states


class _StepStates:
    """Every slot's game state after the current step, read once however many watchers ask for it (a read
    of every slot costs about as much as the step); :meth:`next_step` forgets it."""

    def __init__(self, env):
        self.read, self.data = _states_of(env), None

    def __call__(self) -> list[bytes]:
        if self.data is None:
            self.data = self.read()
        return self.data

    def next_step(self) -> None:
        self.data = None


class _Without:
    """The held-out levels with every ``kind`` removed (the plain agent's walk when it cannot see it)."""

    def __init__(self, env, kind: str):
        self.env, self.kind, self.num_envs = env, kind, env.num_envs

    def level_state(self, level: int) -> bytes:
        state = parse_state(self.env.level_state(level))
        return serialize_state(remove_entities(state, self.kind))

    def load(self, slot, state):
        self.env.load(slot, state)

    def observe(self):
        return self.env.observe()

    def step(self, actions):
        return self.env.step(actions)


def _without_entity(agent, env, levels, entity, s, rt) -> Paths:
    paths = Paths(_states_of(env), 1, len(levels))
    values = np.zeros((1, len(levels)))
    play(
        agent, None, _Without(env, entity), levels, np.array([-1]), values, rt,
        greedy=s.greedy, seed=s.seed, watch=paths,
    )  # fmt: skip
    return paths
