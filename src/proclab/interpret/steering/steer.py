"""Steering as a function: add a contrastive vector at a hook during real play, against same-norm
controls; retarget by channels, against random channel sets.

1. **Vector.** By default each held-out level is steered by its own vector: its first state's
   activation at the hook *with* the entity minus *without* it (Mini et al. 2023's cheese vector;
   levels without the entity get none). With ``per_level=False`` one vector for all levels: the mean of
   that difference over the vector's levels (default: training levels). A mean over other levels is
   smeared over where their entities lie, which is why it is not the default; the mean vector is built
   in both cases (its info is reported, its frames set the retargeting's magnitudes).
2. **Coefficients.** On the held-out levels of the split, the agent plays once per coefficient (default
   ``-2,-1,0,1,2``) with ``coefficient * vector`` added at the hook at every step (0 is the plain agent).
   All variants of a level start from the same game state
   (:mod:`proclab.interpret.interventions.batched_play`), so every outcome is compared with coefficient 0
   *paired by level*: return and steps with level-bootstrap intervals; the binary outcomes (level
   completed, each kind reached) with the exact McNemar test, Holm-corrected over every binary test the
   result reports (:func:`~proclab.interpret.stats.paired.correct`).
3. **Controls** (``controls`` draws, default 20), at every non-zero coefficient: the vector replaced by a
   random Gaussian direction of the same norm (per level, for per-level vectors), and by the
   with-minus-without difference of one random instance of another kind (a wall cell of a maze) rescaled
   to the same norm. A vector that changes behaviour only as much as these do shows that an input of
   that size perturbs the agent, not that it carries the entity. Reported: each outcome's change under
   the vector, under every random draw (and where the vector falls among them: the share of draws
   changing it at least as much in the same direction, ``(1 + k) / (1 + draws)``), the paired difference
   between the vector and the draws' mean (bootstrap), and the vector against the instance control
   (McNemar).
4. **Cheese-blind or broken.** The plain agent also plays each level with the entity removed; the cells
   the agent stood on after each step are compared (:func:`~proclab.interpret.steering.reach.agreement`)
   between that walk and the walk of each arm on the level with the entity. An agent the vector makes
   blind to the entity walks as the plain agent does without it; a broken one walks elsewhere, as the
   random-direction arms do.
5. **Retargeting** (``channels``, e.g. the channels ``analyze probe --entity`` found tracking the
   entity): per held-out level a target cell (a random ``target_cell`` cell at least 2 cells from the
   agent's start) is written into those channels at its position in the map, at each channel's largest
   activation on the vector's frames times ``magnitude``. The write is at one map position for the whole
   episode, so games whose camera follows the agent (CoinRun, ...) are refused: there the target would
   move with the view. The null: the same write into ``channel_controls`` (default 20) random sets of as
   many other channels. Outcome: whether the agent's centre reached the target cell; the channels
   against the plain agent (McNemar), against the random sets' mean (bootstrap), and where they fall
   among the sets.

6. **Both goals** (a game with two: CoinRun's coin and end, Maze's cheese and corner;
   :mod:`proclab.envs.state.goals`): per non-zero coefficient, P(A) and P(B) of the vector, the instance
   control and every random draw against the plain agent on the levels that hold the entity (exact
   McNemar; :func:`goal_changes`), the null a goal call ranks the vector in
   (:mod:`proclab.interpret.goals.detect_steering`).

Per coefficient, ``reach`` says for each kind of the game's glossary present at the start of some
held-out level how often the agent reached it on those levels (its box within ``reach_gap`` of one,
:class:`~proclab.interpret.steering.reach.Near`; the goal also by completing the level), paired with
coefficient 0 over the same levels.

:func:`steer` plays any agent in memory (:class:`SteerSettings` are ``proclab analyze steer``'s options)
and returns a :class:`Steering` result; the command is parse -> call -> write. Everything is drawn first (the
levels, the vectors and their controls, retargeting's targets), the levels are then played in
``SteerSettings.parts`` blocks (:mod:`proclab.interpret.steering.blocks`: here, in local processes or as Ray
tasks, each saved as it comes back), and the statistics run once on the blocks merged in level order, so the
numbers do not depend on how the levels were split or where the blocks were played.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from proclab.envs import agent_split, distinct_levels, parse_split
from proclab.envs.rules import with_rule
from proclab.envs.state import glossary, goal_names, parse_state
from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.interventions.batched_play import ProcgenLevels
from proclab.interpret.stats.paired import against_share, binary_change, correct, mean_change
from proclab.interpret.steering.blocks import Arms, Block, Cells, Played, Writes, layout_of, play_block
from proclab.interpret.steering.reach import agreement
from proclab.interpret.steering.vectors import (
    contrast_vector,
    first_frames,
    instance_vectors,
    kinds_present,
    level_vectors,
    map_sites,
    random_directions,
    same_norm,
    target_cells,
    without,
)
from proclab.io.progress import analysis_phases
from proclab.io.results import Result
from proclab.levels.file import LevelStates
from proclab.models.edited import AgentLike, env_config_of, hook_shapes
from proclab.models.hooks import capture, device_of
from proclab.run.parts import Parts, blocks, digest, fingerprint_of
from proclab.run.runtime import Runtime, make_runtime
from proclab.run.tasks import TaskSettings
from proclab.stats.bootstrap import resamples

MEAN_VECTOR_NOTE = (
    "one mean vector over the vector's levels (per_level off): a mean over other levels is smeared over "
    "where their entities lie; the per-level vector is the one that tests the entity's effect"
)


@dataclass(frozen=True)
class SteerSettings:
    """What :func:`steer` plays (the options of ``proclab analyze steer``, same names and meanings; its
    ``--hook`` is :func:`steer`'s ``hook``)."""

    entity: str | None = None
    """Kind removed to make the contrastive pairs (None: the game's goal, e.g. maze's cheese)."""
    vector_levels: str = "0:200"
    """Levels whose with/without pairs make the vector (START:NUM or a split name; default training levels)."""
    split: str = "held-out"
    """Levels played: ``"held-out"`` (levels the agent never trained on), a named split or START:NUM."""
    levels: int = 200
    """Held-out levels, each played once per coefficient (and per retargeting arm)."""
    coefficients: tuple[float, ...] = (-2.0, -1.0, 0.0, 1.0, 2.0)
    """Coefficients of the vector (0, the plain agent, is the baseline of the paired comparisons)."""
    per_level: bool = True
    """Steer each held-out level with its own vector (False: one mean vector over ``vector_levels``)."""
    controls: int = 20
    """Same-norm random Gaussian directions at every non-zero coefficient, beside the instance control."""
    channels: tuple[int, ...] = ()
    """Retargeting: channels of the hook's map that track the entity (none: no retargeting)."""
    channel_controls: int = 20
    """Retargeting's null: random sets of as many other channels, each written the same way."""
    magnitude: float = 1.0
    """Retargeting: the value written, a multiple of each channel's largest activation on the vector's frames."""
    reach_gap: float = 0.5
    """Per-kind reach: a kind is reached when the agent's box comes within this many world units of one."""
    target_cell: str = "space"
    """Retargeting: the kind of cell a target is drawn from."""
    greedy: bool = True
    """Most likely action (False: sampled, with the same noise in every variant of a level)."""
    rows: int = 64
    """Episodes stepped together."""
    bootstrap: int = 2000
    """Bootstrap resamples of the paired CIs of continuous outcomes (return, steps, walks, shares of draws)."""
    seed: int = 0
    """The held-out levels drawn from ``split``, the envs, sampled actions, the controls and the bootstrap."""
    level_rule: str | None = None
    """Edit every level at its start by this rule (:mod:`proclab.envs.rules`; None: the agent's own)."""
    vector_level_rule: str | None = None
    """Edit the vector's levels (``vector_levels``) by this rule instead (None: ``level_rule``). A vector may be
    built where the entity is in view and played where it is not: CoinRun's coin at the level's end is out of
    view at the start, so a per-level vector there is zero, while a mean over levels whose coin was moved is
    not (the goal benchmark's rule 3, version 3)."""
    parts: int = 1
    """Play the levels in this many blocks, each a unit of its own (:mod:`~proclab.interpret.steering.blocks`;
    the numbers are those of one block)."""

    def check(self) -> None:
        for name in ("levels", "rows", "bootstrap", "parts"):
            if getattr(self, name) < 1:
                raise ProclabError(f"--{name} must be >= 1, got {getattr(self, name)}")
        for name in ("controls", "channel_controls"):
            if getattr(self, name) < 0:
                raise ProclabError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(self, name)}")
        check_coefficients(self.coefficients)
        if not parse_split(self.vector_levels).bounded:
            raise ProclabError(
                f"--vector-levels {self.vector_levels!r}: name a bounded set of levels, e.g. 0:200"
            )


@dataclass(frozen=True)
class Steering(Result):
    """The steering vector and, per coefficient (and per retargeting arm), the paired outcomes against the
    plain agent, the same-norm controls and the walks against the plain agent's without the entity
    (module docstring)."""

    hook: str
    entity: str
    game: str
    levels: int
    vector_info: dict
    coefficients: dict
    vector: np.ndarray = field(repr=False)
    controls: dict | None = None
    paths: dict | None = None
    retarget: dict | None = None
    goals: dict | None = None

    def table(self) -> list[dict]:
        rows = []
        for c, r in self.coefficients.items():
            lc = r["level_complete"]
            rows.append({
                "vector": self.vector_info["kind"],
                "coefficient": float(c),
                "completed": lc["intervened"],
                "change": lc["change"],
                "p (McNemar)": lc.get("p_exact"),
                "p adjusted": lc.get("p_adjusted"),
                "return change": r["return"]["change"],
            })  # fmt: skip
        return rows


def steer(
    agent: AgentLike,
    hook: str,
    *,
    level_states: LevelStates | None = None,
    runtime: Runtime | None = None,
    tasks: TaskSettings | None = None,
    folder: Path | None = None,
    settings: SteerSettings = SteerSettings(),
    progress: bool = True,
) -> Steering:
    """Build the vectors at hook point ``hook`` (e.g. ``torso.block1.hook_out``) and play ``agent`` steered, with
    its controls, on held-out levels (or on ``level_states``, each once per variant) on ``runtime`` (default:
    the agent's). ``progress``: show the vector, the arms and the play as they run.

    With ``settings.parts`` the levels are played in that many blocks (:mod:`.blocks`), each a unit run where
    ``tasks`` says (local processes, Ray tasks; default: here, one after the other), and merged in level order
    before the statistics, which run once, here: the numbers are those of one block, bit for bit. With
    ``folder``, each block is saved there as it comes back, with a fingerprint of what it depends on, and the
    same call again plays only the blocks not yet saved."""
    s = settings
    s.check()
    coefficients = check_coefficients(s.coefficients)
    _check_hook(agent, hook, s)
    rt = runtime or getattr(agent, "runtime", None) or make_runtime("cpu", "fp32")
    env_config = with_rule(env_config_of(agent), s.level_rule)
    game = env_config.games()[0]
    entity = s.entity or _goal(game)
    vector_split = parse_split(s.vector_levels)
    if level_states is not None:
        levels = np.arange(len(level_states))  # the file's states, in order
    else:
        levels = distinct_levels(agent_split(s.split, env_config.split), s.levels, s.seed)
    parts = blocks(
        len(levels), s.parts
    )  # refused before anything is computed, as blocks of another steering are
    fingerprint = None if folder is None else _fingerprint(agent, hook, s, levels, level_states, rt)
    store = Parts(s.parts, folder, fingerprint, job="steering")
    with analysis_phases(progress, 3, "steer") as ph:
        env = ProcgenLevels(env_config, s.rows, s.seed, level_states)
        # the vector's levels are seeds, also when the levels played are a file's states
        seeds = env if level_states is None else ProcgenLevels(env_config, s.rows, s.seed)
        vector_config = (
            env_config if s.vector_level_rule is None else with_rule(env_config, s.vector_level_rule)
        )
        vector_env = seeds if vector_config == env_config else ProcgenLevels(vector_config, s.rows, s.seed)
        try:
            states = [env.level_state(int(lv)) for lv in levels]
            if s.channels:
                _check_fixed_camera(states[0], game)
            with ph.phase(f"vector from {vector_split.label()}"):
                vector, frames, info = _vector(agent, hook, vector_env, vector_split, entity)
            kind = "per-level" if s.per_level else "mean"
            with ph.phase(f"{kind} vectors and controls on {len(levels)} levels"):
                arms, info = _arms(
                    agent, hook, vector, states, seeds, vector_env, vector_split, entity, info, s
                )
                writes = _writes(agent, hook, frames, states, s) if s.channels else None
        finally:
            for opened in {id(e): e for e in (env, seeds, vector_env)}.values():
                opened.close()
        whole = Block(
            agent, hook, env_config, level_states, levels, arms, coefficients, entity, s, rt, writes
        )
        played = _played(whole, parts, store, tasks or TaskSettings(), progress)
    steered, layout = layout_of(coefficients, len(arms.random))
    present = kinds_present(states, glossary(game).feature_kinds())
    by_coefficient, controls, paths, goals = _report(played, layout, steered, arms, present, entity, game, s)
    retarget = None if writes is None or played.hit is None else _retargeted(writes, played.hit, s)
    correct(_binary_tests(by_coefficient, controls, retarget))
    return Steering(
        hook,
        entity,
        game,
        len(levels),
        info,
        by_coefficient,
        vector.numpy(),
        controls,
        paths,
        retarget,
        goals,
    )


UNPLAYED = ("rows", "bootstrap")
"""Settings that do not change what a block plays: saved blocks are merged whatever their values."""


def _played(
    whole: Block, parts: list[np.ndarray], store: Parts, tasks: TaskSettings, progress: bool
) -> Played:
    """Every level of ``whole`` played in blocks (the level indices of each: ``parts``) as units of
    :func:`~proclab.run.parts.run_parts`, those not yet in ``store``; all blocks merged in level order."""
    s = whole.settings
    label = f"play {len(whole.levels)} levels" + (f" in {s.parts} blocks" if s.parts > 1 else "")
    kept = store.run(play_block, lambda i: _block(whole, parts[i]), tasks, label=label, progress=progress)
    return Played.concatenate([Played.of_arrays(arrays) for arrays in kept])


def _block(whole: Block, rows: np.ndarray) -> Block:
    """The block of ``whole``'s levels at ``rows`` (indices), with the arms and writes of those levels alone."""
    return replace(
        whole,
        levels=whole.levels[rows],
        arms=whole.arms.rows(rows),
        writes=None if whole.writes is None else whole.writes.rows(rows),
    )


def _fingerprint(agent, hook: str, s: SteerSettings, levels, states: LevelStates | None, rt: Runtime) -> dict:
    """What the blocks' outcomes depend on: the settings (but :data:`UNPLAYED`), the hook, the agent's weights
    and edits, the levels (and the states of a level-state file), the device and the precision."""
    return fingerprint_of(
        asdict(s),
        UNPLAYED,
        hook=hook,
        agent=digest(*_weights(agent)),
        edits=repr(getattr(agent, "interventions", None)),
        levels=digest(np.asarray(levels, np.int64)),
        level_states=None if states is None else digest(*(st.data for st in states.states)),
        precision="bf16" if rt.bf16 else "fp32",
        device=rt.device.type,
    )


def _weights(agent) -> list[np.ndarray]:
    """The agent's weights as bytes (the wrapped agent's for an edited one; none for a policy without any)."""
    for module in (agent, getattr(agent, "agent", None)):
        if isinstance(module, torch.nn.Module):
            return [
                t.detach().cpu().reshape(-1).view(torch.uint8).numpy() for t in module.state_dict().values()
            ]
    return []


def check_coefficients(values: Sequence[float]) -> np.ndarray:
    """The coefficients, sorted and unique; 0 (the plain agent, the baseline) must be among them."""
    found = np.unique(np.asarray(values, dtype=np.float64))
    if 0.0 not in found:
        raise ProclabError(f"coefficients {list(found)} must include 0 (the plain agent, the baseline)")
    return found


def paired_outcomes(out, base: int, arm: int, idx: np.ndarray) -> dict:
    """Return and steps of variant ``arm`` against variant ``base`` (bootstrap), level completed (McNemar),
    paired by level."""
    return {
        "return": mean_change(out.ret[base], out.ret[arm], idx),
        "level_complete": binary_change(out.complete[base] > 0, out.complete[arm] > 0),
        "length": mean_change(out.length[base], out.length[arm], idx),
    }


def _check_hook(agent, hook: str, s: SteerSettings) -> None:
    """One-line errors for a hook the agent lacks and channels its map lacks, before anything is played."""
    shapes = hook_shapes(agent)
    if hook not in shapes:
        raise unknown_choice("hook", hook, shapes)
    if not s.channels:
        return
    shape = shapes[hook]
    if len(shape) != 3:
        raise ProclabError(f"--channels needs a conv map; {hook} has per-sample shape {shape}")
    bad = [c for c in s.channels if not 0 <= c < shape[0]]
    if bad:
        raise ProclabError(f"--channels {' '.join(map(str, bad))}: {hook} has channels 0-{shape[0] - 1}")
    if shape[0] - len(set(s.channels)) < len(s.channels) and s.channel_controls:
        raise ProclabError(f"--channels: too few other channels at {hook} for the random control")


def _check_fixed_camera(state: bytes, game: str) -> None:
    if parse_state(state).header.center_agent:
        raise ProclabError(
            f"--channels writes one fixed map position for the whole episode, but {game}'s camera follows the "
            "agent (the written target would move with the view): retargeting needs a fixed view (maze, heist, ...)"
        )


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


def _arms(agent, hook, mean, states, seeds, vector_env, vector_split, entity, info, s) -> tuple[Arms, dict]:
    """The steering vector of every held-out level (its own, or the mean over the levels of ``vector_env``) and
    its same-norm controls."""

    shape = hook_shapes(agent)[hook]

    def frames_of(x):
        return first_frames(seeds, x)

    if s.per_level:
        vectors, have = level_vectors(agent, hook, states, entity, frames_of)
        instance = instance_vectors(agent, hook, states, entity, frames_of, s.seed)
        info = {**info, "kind": "per-level", "levels_with_entity": int(have.sum())}
    else:
        have = np.ones(len(states), bool)
        vectors = mean.expand(len(states), *shape).clone()
        source = [
            vector_env.level_state(int(lv))
            for lv in range(vector_split.start, vector_split.start + vector_split.num)
        ]
        pooled = instance_vectors(agent, hook, source, entity, frames_of, s.seed).mean(0)
        instance = pooled.expand(len(states), *shape).clone()
        info = {**info, "kind": "mean", "why": MEAN_VECTOR_NOTE}
    norms = vectors.flatten(1).norm(dim=1)
    instance = same_norm(instance, norms)
    random = random_directions(shape, norms, s.controls, s.seed, shared=not s.per_level)
    info["mean_norm_played"] = float(norms[torch.as_tensor(have)].mean()) if have.any() else 0.0
    return Arms(vectors, random, instance, have), info


def _report(
    played: Played, layout: dict, steered: list[float], arms: Arms, present: np.ndarray, entity, game, s
):
    """The paired comparisons of every arm with the plain agent, its controls, the walks and both goals, on
    the merged blocks (``present``: which kinds each level holds at its start)."""

    outcomes, kinds = played.outcomes, glossary(game).feature_kinds()
    idx = resamples(outcomes.ret.shape[1], s.bootstrap, s.seed)
    by_coefficient = {"0": paired_outcomes(outcomes, 0, 0, idx)}
    by_coefficient["0"]["reach"] = _reach(played.near, kinds, present, outcomes, 0, 0, game)
    for c in steered:
        v = layout["vector", c]
        by_coefficient[f"{c:g}"] = paired_outcomes(outcomes, 0, v, idx)
        by_coefficient[f"{c:g}"]["reach"] = _reach(played.near, kinds, present, outcomes, 0, v, game)
    order = sorted(by_coefficient, key=float)
    by_coefficient = {k: by_coefficient[k] for k in order}
    if not steered:
        return by_coefficient, None, None, None
    draws = len(arms.random)
    goals = (
        None
        if played.goals is None
        else goal_changes(played.goals, goal_names(game), layout, steered, draws, arms.have)
    )
    reached_goal = _reached(outcomes, played.near, kinds, game, entity)
    binary = {"level_complete": outcomes.complete > 0, f"reached {entity}": reached_goal}
    controls = {f"{c:g}": _controls(binary, layout, c, draws, arms.have, s) for c in steered}
    assert played.blind is not None  # played wherever a coefficient steers
    walks = _walks(played.cells, played.blind, layout, steered, draws, arms.have, s)
    return by_coefficient, controls, walks, goals


def goal_changes(reached: np.ndarray, names, layout: dict, steered, draws: int, have: np.ndarray) -> dict:
    """Both goals (``reached``: ``(2, V, L)``, :class:`GoalWatch`) on the levels that hold the entity, per
    non-zero coefficient: the vector's arm, the instance control and every random draw against the plain
    agent (exact McNemar). The vector's tests of both goals at every coefficient are one Holm family (what
    a goal call reads); the controls' tests (instance and draws) another: they are the null the vector is
    ranked in, not claims."""

    rows = np.flatnonzero(have)
    h = reached[:, :, rows]
    plain = h[:, 0]
    out = {
        "names": list(names),
        "levels": len(rows),
        "plain": {g: float(plain[i].mean()) if len(rows) else None for i, g in enumerate(names)},
        "coefficients": {},
    }
    vector_tests, control_tests = [], []
    for c in steered:
        arm = {"vector": {}, "instance": {}, "random": {}}
        for i, g in enumerate(names):
            vec = binary_change(plain[i], h[i, layout["vector", c]])
            inst = binary_change(plain[i], h[i, layout["instance", c]])
            drawn = [binary_change(plain[i], h[i, layout[f"random {d}", c]]) for d in range(draws)]
            arm["vector"][g], arm["instance"][g] = vec, inst
            arm["random"][g] = {
                "draws": drawn,
                "changes": [d["change"] for d in drawn],
                **(rank_among_draws(vec["change"], np.array([d["change"] for d in drawn])) if draws else {}),
            }
            vector_tests.append(vec)
            control_tests.extend([inst, *drawn])
        out["coefficients"][f"{c:g}"] = arm
    correct(vector_tests)
    correct(control_tests)
    out["correction"] = {
        "vector": f"holm over the vector's {len(vector_tests)} tests (both goals, every non-zero coefficient)",
        "controls": f"holm over the {len(control_tests)} tests of the instance control and the random draws",
    }
    return out


def _reached(outcomes, near: np.ndarray, kinds: list[str], game: str, entity: str) -> np.ndarray:
    """``(V, L)``: the agent reached the entity (came near it, or completed the level when it is the goal)."""
    near_entity = (
        near[:, :, kinds.index(entity)] if entity in kinds else np.zeros(outcomes.complete.shape, bool)
    )
    return near_entity | ((outcomes.complete > 0) if entity == glossary(game).goal else False)


def _reach(
    near: np.ndarray, kinds: list[str], present: np.ndarray, outcomes, base: int, arm: int, game
) -> dict:
    """Per kind present at the start of some level: the share of those levels on which the agent reached
    it (the goal also by completing the level), arm against base over the same levels (McNemar)."""

    goal = glossary(game).goal
    out = {}
    for k, kind in enumerate(kinds):
        have = np.flatnonzero(present[:, k])
        if not len(have):
            continue  # the game's kind appears on none of these levels
        reached = near[:, :, k] | ((outcomes.complete > 0) if kind == goal else False)
        out[kind] = {"levels": len(have), **binary_change(reached[base, have], reached[arm, have])}
    return out


def rank_among_draws(vector_change: float, draw_changes: np.ndarray) -> dict:
    """Where the vector's change falls among the random draws': the share of draws that change the
    outcome at least as much in the same direction, ``(1 + k) / (1 + draws)`` (1 for no change)."""
    sign = np.sign(vector_change)
    k = int((sign * draw_changes >= sign * vector_change - 1e-12).sum()) if sign else len(draw_changes)
    return {"draws_as_extreme": k, "p_rank": (1 + k) / (1 + len(draw_changes))}


def _controls(binary: dict, layout: dict, c: float, draws: int, have: np.ndarray, s) -> dict:
    """At coefficient ``c``, per binary outcome (on levels that hold the entity): the vector, the random
    draws and the instance control, each against the plain agent, and the vector against them."""

    out = {}
    rows = np.flatnonzero(have)
    idx = resamples(len(rows), s.bootstrap, s.seed)
    for name, hit in binary.items():
        h = hit[:, rows]
        plain, vec, inst = h[0], h[layout["vector", c]], h[layout["instance", c]]
        entry = {
            "levels": len(rows),
            "vector_vs_plain_change": float(vec.mean() - plain.mean()),
            "instance_vs_plain": binary_change(plain, inst),
            "vector_vs_instance": binary_change(inst, vec),
        }
        if draws:
            drawn = np.stack([h[layout[f"random {d}", c]] for d in range(draws)])
            changes = drawn.mean(1) - plain.mean()
            share = drawn.mean(0)  # per level: the share of draws that got there (a continuous outcome)
            entry["random"] = {
                "draws": draws,
                "changes": [float(x) for x in changes],
                **rank_among_draws(entry["vector_vs_plain_change"], changes),
                "random_vs_plain": mean_change(plain, share, idx),
                "vector_vs_random": against_share(share, vec, idx, s.bootstrap, s.seed),
            }
        out[name] = entry
    return out


def _walks(cells: Cells, blind: Cells, layout, steered, draws: int, have: np.ndarray, s) -> dict:
    """Per arm, the share of steps at which its walk on the level with the entity stood where the plain
    agent's walk without the entity stood (per level, then the mean over the levels that hold the
    entity); the vector against the plain agent, the random draws' mean and the instance control
    (paired bootstrap over levels). A level whose episode ended on its first step (no cell seen) is
    left out of the comparisons it has no walk for."""

    rows = np.flatnonzero(have)

    def agree(v):
        return np.array([agreement(cells[v][lv], blind[0][lv]) for lv in rows])

    def change(a, b):
        keep = np.isfinite(a) & np.isfinite(b)
        if not keep.any():
            return None
        idx = resamples(int(keep.sum()), s.bootstrap, s.seed)
        return {"levels": int(keep.sum()), **mean_change(a[keep], b[keep], idx)}

    plain = agree(0)
    out = {"levels": len(rows), "plain_with_entity": _nanmean(plain)}
    for c in steered:
        vec, inst = agree(layout["vector", c]), agree(layout["instance", c])
        row = {
            "vector": _nanmean(vec),
            "instance": _nanmean(inst),
            "vector_vs_plain": change(plain, vec),
            "vector_vs_instance": change(inst, vec),
        }
        if draws:
            each = np.array([agree(layout[f"random {d}", c]) for d in range(draws)])
            seen = np.isfinite(each)
            total = np.where(seen, each, 0.0).sum(0)
            rand = np.where(seen.any(0), total / np.maximum(seen.sum(0), 1), np.nan)  # per level, over draws
            row["random"] = _nanmean(rand)
            row["vector_vs_random"] = change(rand, vec)
        out[f"{c:g}"] = row
    return out


def _nanmean(x: np.ndarray) -> float | None:
    finite = x[np.isfinite(x)]
    return float(finite.mean()) if len(finite) else None


def _binary_tests(by_coefficient: dict, controls: dict | None, retarget: dict | None) -> list[dict]:
    """Every test of a binary outcome the result reports (one family for the correction): the exact
    McNemar tests and the permutation tests against the random draws' share; coefficient 0 is the
    baseline and tests nothing."""

    tests = []
    for c, row in by_coefficient.items():
        if float(c) != 0:
            tests.append(row["level_complete"])
            tests.extend(row.get("reach", {}).values())
    for by_outcome in (controls or {}).values():
        for entry in by_outcome.values():
            tests.extend([entry["instance_vs_plain"], entry["vector_vs_instance"]])
            if "random" in entry:
                tests.append(entry["random"]["vector_vs_random"])
    if retarget is not None:
        tests.append(retarget["tracking_vs_plain"])
        if "random_sets" in retarget:
            tests.append(retarget["random_sets"]["tracking_vs_random"])
    return tests


def _writes(agent, hook, frames, states: list[bytes], s) -> Writes:
    """Retargeting's arms: the tracking channels and ``channel_controls`` random sets of as many other channels,
    each written at each channel's peak times ``magnitude``, and every level's target (module docstring)."""

    shape = hook_shapes(agent)[hook]
    others = np.setdiff1d(np.arange(shape[0]), s.channels)
    rng = np.random.default_rng([s.seed, 5])
    sets = [
        tuple(int(c) for c in rng.choice(others, len(s.channels), False)) for _ in range(s.channel_controls)
    ]
    peak = s.magnitude * _peaks(agent, hook, frames, shape)
    arms = (tuple(s.channels), *sets)
    targets = target_cells(states, s.target_cell, s.seed)
    magnitudes = tuple(tuple(float(peak[c]) for c in ch) for ch in arms)
    return Writes(arms, magnitudes, targets, map_sites(states, targets, shape))


def _retargeted(writes: Writes, hit: np.ndarray, s) -> dict:
    """Whether the agent reached the target (``hit``: ``(1 + arms, L)``, the plain agent first): the tracking
    channels against the plain agent and against the random sets."""

    arms, sets = writes.arms, list(writes.arms[1:])
    out = {
        "channels": {"tracking": arms[0], "random_sets": sets},
        "magnitudes": {
            c: m
            for ch, mags in zip(arms, writes.magnitudes, strict=True)
            for c, m in zip(ch, mags, strict=True)
        },
        "reached": {"plain": float(hit[0].mean()), "tracking": float(hit[1].mean())},
        "tracking_vs_plain": binary_change(hit[0], hit[1]),
    }
    if sets:
        idx = resamples(hit.shape[1], s.bootstrap, s.seed)
        share = hit[2:].mean(0)  # per level: the share of random sets whose write got the agent there
        changes = hit[2:].mean(1) - hit[0].mean()
        out["reached"]["random"] = float(share.mean())
        out["random_sets"] = {
            "changes": [float(x) for x in changes],
            **rank_among_draws(out["tracking_vs_plain"]["change"], changes),
            "random_vs_plain": mean_change(hit[0], share, idx),
            "tracking_vs_random": against_share(share, hit[1], idx, s.bootstrap, s.seed),
        }
    return out


def _peaks(agent, hook, frames, shape) -> np.ndarray:
    """Each channel's largest activation over the vector's frames (the magnitude a target is written with)."""

    dev = device_of(agent)
    obs = torch.as_tensor(frames[:256], device=dev)
    prev = torch.zeros(len(obs), device=dev) if agent.config.prev_reward else None
    first = torch.ones(len(obs), dtype=torch.bool, device=dev)
    with torch.inference_mode(), capture(agent, hook, detach=True) as acts:
        agent.step(obs, agent.initial_state(len(obs), device=dev), first, prev)
    return acts[hook].reshape(len(obs), *shape).amax((0, 2, 3)).float().cpu().numpy()
