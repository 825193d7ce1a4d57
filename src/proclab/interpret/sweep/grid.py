"""The intervention sweep: every arm on every direction of the basis, in the real environment.

For each of the swept directions ``m`` (default: every direction of the basis) and each arm
(:mod:`proclab.interpret.interventions.arms`: ``collapse``, ``mean``, ``resample``, ``p05``, ``p95``), the agent
plays the same paired levels as the plain agent (the baseline) with coordinate ``m`` of its state
held at the arm's value. All ``1 + directions x arms`` variants of a batch of levels step together
(:mod:`proclab.interpret.interventions.batched_play`), and the changes against the baseline are tested with a
correction over the directions (:mod:`proclab.interpret.sweep.stats`).

:func:`sweep` is the computation (any agent, basis, env: tests run it on a planted agent in a
small deterministic env); :func:`~proclab.interpret.sweep.command.run_sweep` is the stage on an analysis folder (``proclab analyze
sweep``, and the quickstart), which writes ``ANALYSIS/sweep/``: ``sweep.json`` (every
number), ``sweep_table.txt`` / ``sweep_table.csv`` (one row per direction and arm, sorted by
effect size), ``sweep.png`` (changes per direction and arm) and ``episodes.npz`` (per variant and
level: return, completion, length, action counts, held value).

**Swaps** (``--swaps 3:7,saw:crate``, :mod:`proclab.interpret.sweep.swaps`): two coordinates exchanged at
every step, each pair one more variant on the same levels, tested against the baseline as the arms are
(one family of their own, ``swap``), and left out of the directions' claims. **Deaths by cause**
(:mod:`proclab.interpret.sweep.deaths`): in a game whose hazards are named, each variant's rate of deaths
and of deaths by each hazard, paired with the baseline's as every per-level metric.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from proclab.envs.actions import ACTION_NAMES
from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.bases.activations import HOOK
from proclab.interpret.bases.coordinates import Coordinates
from proclab.interpret.bases.pca_ica import KINDS
from proclab.interpret.bases.random_directions import WithRandom
from proclab.interpret.interventions.arms import (
    DEFAULT_ARMS,
    ON_DATA_RANGE,
    Recorded,
    describe,
    off_data_warning,
    parse_arms,
    split_arm,
)
from proclab.interpret.interventions.batched_play import Outcomes, play
from proclab.interpret.interventions.goal_watch import GoalWatch
from proclab.interpret.stats.paired import binary_change, correct
from proclab.interpret.sweep.claims import sweep_claims
from proclab.interpret.sweep.deaths import RADIUS, Deaths
from proclab.interpret.sweep.landing import Landing, landing
from proclab.interpret.sweep.parts import Parts, Played, block_seed
from proclab.interpret.sweep.plan import SweepPlan, planned, swap_code
from proclab.interpret.sweep.random_swaps import draw_pairs, swap_control
from proclab.interpret.sweep.stats import MEANS, TV, baseline_summary, compare, halves
from proclab.interpret.sweep.swaps import parse_swaps, resolve
from proclab.models.edited import Intervened
from proclab.run.parts import blocks
from proclab.stats.corrections import CORRECTIONS

NAME = "sweep"
FORMAT = "proclab-intervention-sweep"
SORTS = (*MEANS, TV)


@dataclass(frozen=True)
class SweepSettings:
    """What a sweep plays and how it tests: the options of ``proclab analyze sweep``, same names and meanings
    (docs/analyses.md); :func:`proclab.analyze.sweep` plays an agent in memory with them, in one part."""

    arms: str = ",".join(DEFAULT_ARMS)
    """Arms, comma-separated: collapse, mean, resample, p05, p95, on, resample-step, and brief ones, ARM@K."""
    directions: str | None = None
    """Directions swept, as ids and ranges (``"0:8,12"``; None: every direction; ``"none"``: only the swaps)."""
    levels: int = 200
    """Paired levels, drawn from ``split``: every (direction, arm) and the baseline play each once."""
    split: str = "held-out"
    """Levels played: ``"held-out"`` (levels the agent never trained on), a named split or START:NUM."""
    levels_from: Path | None = None
    """A level-state file whose states are the paired levels instead (the command only)."""
    level_rule: str | None = None
    """Edit every level at its start by this rule (:mod:`proclab.envs.rules`; None: the agent's own)."""
    greedy: bool = True
    """Take the most likely action (False: sampled, with the same random numbers in every variant)."""
    rows: int = 256
    """Episodes played at once: env slots stepped together, one batched agent forward per step."""
    bootstrap: int = 2000
    """Bootstrap resamples of the paired intervals."""
    permutations: int = 5000
    """Permutations of the paired tests' p-values."""
    correction: str = "holm"
    """Multiple-comparison correction over the directions: holm or bh (Benjamini-Hochberg)."""
    alpha: float = 0.05
    """Family-wise error rate (holm) or false discovery rate (bh) of each arm and metric."""
    sort: str = "return"
    """Table order: the size of the change in return, level_complete, length or tv_distance."""
    random_directions: int = 0
    """Random unit directions of the basis's span swept beside its own, as their control (same-norm edits)."""
    landing: int = 200
    """States kept per variant to measure how far edited states lie from the recorded ones (0: not measured)."""
    equivalence_margin: float = 0.5
    """TOST margin on return: a direction has "no effect" only where every on-data arm's change lies within it."""
    swaps: str = ""
    """Pairs ``I:J`` of directions whose coordinates are exchanged at every step, each one more variant."""
    random_swaps: int = 0
    """The swaps' control: this many random pairs of directions swapped on the same levels."""
    deaths: bool = True
    """Deaths by cause, in a game whose hazards are named (the command only)."""
    death_radius: float = RADIUS
    """World units within which the nearest hazard is a death's cause."""
    goals: bool = False
    """In a game with two goals, whether each episode reached each, per variant (exact McNemar)."""
    parts: int = 1
    """Blocks the levels are played in, each saved once played (the command only; in memory: 1)."""
    part: int | None = None
    """Play only this block (1-based; the command only)."""
    seed: int = 0
    """The level draw, the resample-ablation draws, sampled actions, bootstrap and permutations."""
    kind: str = "ica"
    """In memory: the basis's coordinates the arms hold, ica (its ICs) or pca (its first k PCs); the command
    picks a folder's coordinate system with ``--basis`` instead."""

    def check(self) -> None:
        if self.kind not in KINDS:
            raise unknown_choice("kind", self.kind, KINDS)
        for name in ("levels", "rows", "bootstrap", "permutations", "parts"):
            if getattr(self, name) < 1:
                raise ProclabError(f"--{name} must be >= 1, got {getattr(self, name)}")
        if self.levels_from is None and self.parts > self.levels:
            raise ProclabError(
                f"--parts must be between 1 and the number of levels ({self.levels}), got {self.parts}"
            )
        if self.part is not None and not 1 <= self.part <= self.parts:
            raise ProclabError(f"--part must be between 1 and --parts ({self.parts}), got {self.part}")
        if not self.equivalence_margin > 0:
            raise ProclabError(f"--equivalence-margin must be > 0, got {self.equivalence_margin}")
        if self.random_directions < 0:
            raise ProclabError(f"--random-directions must be >= 0, got {self.random_directions}")
        if self.correction not in CORRECTIONS:
            raise unknown_choice("--correction", self.correction, CORRECTIONS)
        if self.sort not in SORTS:
            raise unknown_choice("--sort", self.sort, SORTS)
        if not 0 < self.alpha < 1:
            raise ProclabError(f"--alpha must be in (0, 1), got {self.alpha}")
        if not self.death_radius >= 0:
            raise ProclabError(f"--death-radius must be >= 0, got {self.death_radius}")
        parse_arms(self.arms)
        if self.random_swaps < 0:
            raise ProclabError(f"--random-swaps must be >= 0, got {self.random_swaps}")
        if self.random_swaps and not parse_swaps(self.swaps):
            raise ProclabError("--random-swaps is the control of the chosen --swaps: name the swaps too")
        if not parse_swaps(self.swaps) and self.directions == "none":
            raise ProclabError(
                "--directions none holds no direction and --swaps names no pair: nothing to play"
            )


@dataclass(frozen=True)
class Variants:
    """Variant 0 is the baseline; variant ``1 <= v < held`` holds ``direction[v]`` as ``arm[v]`` holds it,
    at ``values[v, l]`` on level ``l``; variant ``v >= held`` swaps the coordinates ``pair[v]``."""

    direction: np.ndarray  # (V,) int, -1 for the baseline and swaps
    arm: list[str]
    values: np.ndarray  # (V, L); NaN: drawn at every step
    planned: np.ndarray  # (V,) the coordinate the player is planned with (a brief edit's length in it)
    pair: np.ndarray  # (V, 2) int: the coordinates a swap exchanges, -1 for the other variants

    @classmethod
    def of(
        cls,
        directions: list[int],
        arms: tuple[str, ...],
        recorded: Recorded,
        levels: int,
        seed: int,
        swaps: Sequence[tuple[int, int]] = (),
    ):
        rng = np.random.default_rng([seed, 3])
        direction, arm, values, plan = [-1], ["baseline"], [np.zeros(levels)], [-1]
        for m in directions:
            for a in arms:
                direction.append(m)
                arm.append(a)
                values.append(recorded.held(a, m, levels, rng))
                plan.append(planned(m, recorded.k, split_arm(a)[1]))
        pair = [(-1, -1)] * len(arm)
        for i, j in swaps:
            direction.append(-1)
            arm.append(f"swap {i}:{j}")
            values.append(np.zeros(levels))
            plan.append(swap_code(i, j, recorded.k))
            pair.append((i, j))
        return cls(
            np.array(direction, np.int64), arm, np.stack(values), np.array(plan, np.int64), np.array(pair)
        )

    @property
    def held(self) -> int:
        """Variants before the swaps: the baseline and every (direction, arm)."""
        return int(np.sum(self.pair[:, 0] < 0))


def _refuse_timed_arms(arms: tuple[str, ...], key: str) -> None:
    """Brief (``ARM@K``) and ``resample-step`` arms count steps in a carried state; a basis held at a hook
    point (nothing carried) takes whole-episode arms only."""
    timed = [a for a in arms if split_arm(a)[1] > 0 or split_arm(a)[0] == "resample-step"]
    if timed:
        raise ProclabError(
            f"{', '.join(timed)} needs a recurrent state; the basis at {key.removeprefix(HOOK)} takes "
            "whole-episode arms (collapse, mean, resample, p05, p95, on)"
        )


def sweep(
    agent,
    coords: Coordinates,
    key: str,
    recorded: Recorded,
    env,
    levels: np.ndarray,
    directions: list[int],
    config: SweepSettings,
    runtime,
    tick: Callable[[int], None] | None = None,
    states: np.ndarray | None = None,
    swaps: list[tuple[int, int]] | None = None,
    deaths: Deaths | None = None,
    store: Parts | None = None,
    goals: GoalWatch | None = None,
    test: bool = True,
) -> tuple[dict, Outcomes, Variants] | None:
    """Play and test every (direction, arm) of ``config`` on ``levels`` of ``env``, and every swap
    (``swaps``: coordinate pairs; default the ids of ``config.swaps``); returns the sweep's results
    (``sweep.json`` without the command's provenance), the outcomes and variants. With the recorded
    ``states`` (``(N, D)``) and ``config.landing``, where the edits land too; with ``deaths`` (a watcher of
    the env's game states), every variant's deaths by cause; with ``goals`` (a :class:`GoalWatch` of the
    env), whether every episode reached each of the game's two goals. The levels are played in
    ``config.parts`` blocks kept in ``store`` (:mod:`proclab.interpret.sweep.parts`; default: in memory);
    with ``config.part``, only that block is played, and None is returned while other blocks are missing.
    ``test=False`` plays and saves, and returns None even when the last block is saved: a task of a sweep
    spread over processes or a cluster leaves the tests to the caller that merges every block, once."""
    config.check()
    arms = parse_arms(config.arms)
    pairs = resolve(parse_swaps(config.swaps), recorded.k, None)[0] if swaps is None else list(swaps)
    own = coords.first if isinstance(coords, WithRandom) else coords.k
    drawn = draw_pairs(own, config.random_swaps, config.seed, pairs)
    variants = Variants.of(directions, arms, recorded, len(levels), config.seed, pairs + drawn)
    landed = states is not None and config.landing > 0 and not key.startswith(HOOK)
    store = Parts(config.parts) if store is None else store
    saved = store.saved()
    for i, block in enumerate(blocks(len(levels), config.parts)):
        if i in saved:
            if tick is not None:
                tick(len(block) * len(variants.arm))
            continue
        if config.part is None or i == config.part - 1:
            player = _player(agent, key, config, arms, bool(pairs), landed, block_seed(config.seed, i))
            plan = SweepPlan(coords, key, recorded.values)
            store.save(
                i,
                _play_block(
                    *player, plan, env, levels[block], variants, block, config, runtime, tick, deaths, goals
                ),
            )
    if not test or not store.complete():
        return None
    played = store.everything(config.landing, config.seed)
    out = played.outcomes
    if deaths is not None:
        deaths.cause = played.cause
    names = _action_names(agent.config.num_actions)
    random = {m for m in directions if isinstance(coords, WithRandom) and coords.is_random(m)}
    lands = landing(played.reservoirs, variants.planned, variants.values, states) if landed else None
    rates = {} if deaths is None else deaths.rates(out.complete, out.timed_out)
    per_level = {f"deaths:{cause}": r for cause, r in rates.items()}
    results, swapped, reports = _tested(
        out, variants, recorded, random, lands, names, config, per_level, len(drawn)
    )
    n = variants.held
    chosen = list(range(n, n + len(pairs)))
    control = (
        swap_control(
            {"return": out.ret, "level_complete": out.complete, "length": out.length, **per_level},
            chosen,
            list(range(n + len(pairs), len(variants.arm))),
            pairs,
            bootstrap=config.bootstrap,
            seed=config.seed,
        )
        if drawn
        else []
    )
    claimed = sweep_claims(
        out,
        variants.direction[:n],
        variants.arm[:n],
        reports[: n - 1],
        random,
        correction=config.correction,
        alpha=config.alpha,
        margin=config.equivalence_margin,
    )
    results.sort(key=lambda r: _effect(r, config.sort), reverse=True)
    summary = {
        "levels": [int(x) for x in levels],
        "parts": config.parts,
        "directions": [m for m in directions if m not in random],
        "random_directions": sorted(random),
        "arms": {a: describe(a) for a in arms},
        "correction": _correction(config, len(directions) - len(random)),
        **_body(config, out, names, results, swapped, claimed, arms),
        "swap_control": control,
        "deaths": None if deaths is None else _deaths_head(deaths, rates, config),
        "goals": None if goals is None else goal_changes(played.goals, goals.names, variants, random),
        "landing_baseline": None if lands is None else lands[0],
        "power": power(len(levels), config.alpha, len(directions) - len(random), claimed),
        "warning": off_data_warning({_label(r, coords): r["edit"] for r in results if not r["random"]}),
        **_timing(out, played.seconds),
    }
    return summary, out, variants


def _play_block(
    player: Intervened,
    lands: Landing | None,
    plan: SweepPlan,
    env,
    levels,
    variants: Variants,
    block,
    config: SweepSettings,
    runtime,
    tick,
    deaths,
    goals=None,
) -> Played:
    """Play every variant on the levels of one block (``block``: their indices among all levels)."""
    if deaths is not None:
        deaths.start(len(variants.arm), levels)
    if goals is not None:
        goals.start(len(variants.arm), levels)
    watchers = [w for w in (deaths, goals) if w is not None]
    start = time.perf_counter()
    out = play(
        player,
        plan,
        env,
        levels,
        variants.planned,
        variants.values[:, block],
        runtime,
        greedy=config.greedy,
        seed=config.seed,
        tick=tick,
        watch=(lambda *a: [w(*a) for w in watchers]) if watchers else None,
        observe=lands,
    )
    return Played(
        out,
        None if deaths is None else deaths.classify(out.complete, out.timed_out).copy(),
        None if lands is None else lands.reservoirs,
        time.perf_counter() - start,
        None if goals is None else goals.outcomes(out.complete),
    )


def _player(
    agent, key: str, config: SweepSettings, arms, swapping: bool, landed: bool, seed: int
) -> tuple[Intervened, Landing | None]:
    """The agent wrapper that plays the variants (counting each row's steps for brief edits; its redraws
    seeded with ``seed``) and, when ``landed``, what keeps the states its edits land on (in a carried
    state's space only)."""
    if key.startswith(HOOK):
        _refuse_timed_arms(arms, key)
        if swapping:
            raise ProclabError(
                f"--swaps needs a recurrent state; the basis at {key.removeprefix(HOOK)} takes holds only"
            )
    player = Intervened(agent, seed=seed, count_steps=True)
    return player, (Landing(key, config.landing, seed) if landed else None)


def _body(config: SweepSettings, out: Outcomes, names, results, swapped, claimed, arms) -> dict:
    return {
        "bootstrap": config.bootstrap,
        "greedy": config.greedy,
        "seed": config.seed,
        "sort": config.sort,
        "baseline": baseline_summary(out, names),
        "results": results,
        "swaps": swapped,
        "significant": _significant([r for r in results if not r["random"]], arms),
        "claims": claimed,
    }


def _timing(out: Outcomes, played: float) -> dict:
    steps = int(out.length.sum())
    return {
        "episodes": int(out.ret.size),
        "steps": steps,
        "play_seconds": round(played, 3),
        "steps_per_second": round(steps / max(played, 1e-9), 1),
    }


def _deaths_head(deaths: Deaths, rates: dict[str, np.ndarray], config: SweepSettings) -> dict:
    """What the deaths by cause are and the baseline's rates (each variant's changes are in its row)."""
    return {
        "causes": ["any", *deaths.causes],
        "radius": config.death_radius,
        "rule": "ended without completing the level before the time limit; cause: the hazard kind nearest the "
        f"agent's box on the step before the fatal one (its episode replayed), within {config.death_radius:g} world units (else unclear)",
        "baseline": {cause: float(r[0].mean()) for cause, r in rates.items()},
    }


def _tested(
    out: Outcomes,
    variants: Variants,
    recorded: Recorded,
    random: set[int],
    lands,
    names,
    config,
    per_level,
    random_swaps: int = 0,
):
    """Every variant against the baseline (random directions, swaps and the last ``random_swaps`` swaps, the
    random pairs, in families of their own), with where its edit lies in the recorded distribution, its
    split-half changes and, when measured, where it lands; returns the sweep's result rows, its swap rows
    and the reports they were made from (in variant order)."""
    first_random = len(variants.arm) - random_swaps
    family = [
        ("random swap" if v >= first_random else "swap")
        if p[0] >= 0
        else ("random " if int(d) in random else "") + a
        for v, (d, a, p) in enumerate(zip(variants.direction, variants.arm, variants.pair, strict=True))
    ]
    reports = compare(
        out,
        family,
        names,
        bootstrap=config.bootstrap,
        permutations=config.permutations,
        correction=config.correction,
        alpha=config.alpha,
        seed=config.seed,
        per_level=per_level,
    )
    results, swapped = [], []
    for v, rep in enumerate(reports, start=1):
        rep["halves"] = halves(out, v)
        if lands is not None:
            rep["landing"] = lands[v]
        if v >= variants.held:
            i, j = (int(x) for x in variants.pair[v])
            swapped.append(
                {
                    "swap": [i, j],
                    "arm": variants.arm[v],
                    "random": v >= first_random,
                    "edit": swap_placement(recorded, i, j),
                    **rep,
                }
            )
            continue
        m = int(variants.direction[v])
        rep["edit"] = recorded.placement(m, variants.values[v])
        results.append({"direction": m, "arm": variants.arm[v], "random": m in random, **rep})
    return results, swapped, reports


def goal_changes(reached: np.ndarray, names, variants: Variants, random: set[int]) -> dict:
    """Both goals (``reached``: ``(2, V, L)``) of every held (direction, arm) against the baseline on the same
    levels (exact McNemar): the swept directions' tests of both goals are one Holm family (what a goal call
    reads: does some edit change one goal and not the other), the random directions' another; swaps are
    left out (their rows carry no goals)."""
    base = reached[:, 0]
    rows, chosen, drawn = [], [], []
    for v in range(1, variants.held):
        m = int(variants.direction[v])
        row = {"direction": m, "arm": variants.arm[v], "random": m in random}
        for i, g in enumerate(names):
            row[g] = binary_change(base[i], reached[i, v])
            (drawn if m in random else chosen).append(row[g])
        rows.append(row)
    correct(chosen)
    correct(drawn)
    return {
        "names": list(names),
        "levels": int(reached.shape[2]),
        "baseline": {g: float(base[i].mean()) for i, g in enumerate(names)},
        "variants": rows,
        "correction": f"holm over the swept directions' {len(chosen)} tests (both goals, every arm)"
        + (f"; the random directions' {len(drawn)} tests another family" if drawn else ""),
    }


def swap_placement(recorded: Recorded, i: int, j: int) -> dict:
    """Where a swap puts each coordinate: the share of ``j``'s recorded values outside ``i``'s recorded
    0.5-99.5 % range (what ``i`` shows under the swap, as far as the recorded states tell) and the reverse;
    ``off_data`` when either is above one half."""
    lo, hi = ON_DATA_RANGE

    def outside(a: int, b: int) -> float:
        pct = recorded.percentile(a, recorded.values[:, b])
        return float(np.mean((pct < lo) | (pct > hi)))

    shares = [outside(i, j), outside(j, i)]
    return {"off_data_share": shares, "off_data": max(shares) > 0.5}


def power(levels: int, alpha: float, directions: int, claimed: dict) -> dict:
    """What ``levels`` paired levels can show at all: the paired permutation test swaps a level's two
    outcomes, so of its ``2^L`` sign patterns at least the observed one and its mirror image are as
    extreme, and no p-value falls below ``2^(1 - L)`` (0.5 at 2 levels). ``testable`` is False when not
    even one uncorrected test can reach ``alpha``; ``levels_for_claims`` is the least number of levels at
    which a direction's claim, corrected over its tests and the directions, can."""
    smallest = 2.0 ** (1 - levels)
    tests = max([r["tests"] for r in claimed["basis"]] + [1])
    needed = int(np.ceil(1 + np.log2(tests * max(1, directions) / alpha)))
    return {"smallest_p": smallest, "testable": smallest <= alpha, "levels_for_claims": needed}


def _action_names(num_actions: int) -> list[str]:
    return (
        list(ACTION_NAMES[:num_actions])
        if num_actions <= len(ACTION_NAMES)
        else [str(a) for a in range(num_actions)]
    )


def _effect(result: dict, sort: str) -> tuple[float, float]:
    """Sort key: the size of the change in ``sort``, then the TV distance."""
    size = result[TV]["value"] if sort == TV else abs(result[sort]["change"])
    return size, result[TV]["value"]


def _correction(config: SweepSettings, tests: int) -> dict:
    return {
        "method": config.correction,
        "name": CORRECTIONS[config.correction],
        "alpha": config.alpha,
        "family": "one arm and one metric over the swept directions (random directions: their own families)",
        "tests_per_family": tests,
        "p_values": f"paired permutation test, {config.permutations} permutations",
    }


def _significant(results: list[dict], arms: tuple[str, ...]) -> dict[str, list[int]]:
    """Per arm, the directions with a significant change in return, completion, length or TV."""
    out = {a: set() for a in arms}
    for r in results:
        if any(r[metric]["significant"] for metric in (*MEANS, TV)):
            out[r["arm"]].add(r["direction"])
    return {a: sorted(d) for a, d in out.items()}


def _label(result: dict, coords: Coordinates) -> str:
    name = "random" if result["random"] else coords.label
    return f"{name} {result['direction']} {result['arm']}"
