"""The intervention sweep: every arm on every direction of the basis, in the real environment.

For each of the swept directions ``m`` (default: every direction of the basis) and each arm
(:mod:`proclab.interpret.interventions.arms`: ``collapse``, ``mean``, ``resample``, ``p05``, ``p95``), the agent
plays the same paired levels as the plain agent (the baseline) with coordinate ``m`` of its state
held at the arm's value. All ``1 + directions x arms`` variants of a batch of levels step together
(:mod:`proclab.interpret.interventions.batched_play`), and the changes against the baseline are tested with a
correction over the directions (:mod:`proclab.interpret.sweep.stats`).

:func:`sweep` is the computation (any agent, basis, env: tests run it on a planted agent in a
small deterministic env); :func:`run_sweep` is the stage on an analysis folder (``proclab analyze
intervene --sweep``, and the quickstart), which writes ``ANALYSIS/sweep/``: ``sweep.json`` (every
number), ``sweep_table.txt`` / ``sweep_table.csv`` (one row per direction and arm, sorted by
effect size), ``sweep.png`` (changes per direction and arm) and ``episodes.npz`` (per variant and
level: return, completion, length, action counts, held value).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.bases.coordinates import Coordinates
from proclab.interpret.bases.systems import check_system
from proclab.interpret.interventions.arms import ARMS, DEFAULT_ARMS, Recorded, off_data_warning, parse_arms
from proclab.interpret.interventions.batched_play import Outcomes, play
from proclab.interpret.interventions.edit_target import EditArgs
from proclab.interpret.interventions.edited_agent import held_agent
from proclab.interpret.stats.corrections import CORRECTIONS
from proclab.interpret.sweep.stats import MEANS, TV, baseline_summary, compare

NAME = "sweep"
FORMAT = "proclab-intervention-sweep"
SORTS = (*MEANS, TV)


@dataclass(frozen=True)
class SweepArgs(EditArgs):
    """Intervention sweep: every arm on every basis direction, on paired real levels, with corrected CIs.

    Arms: collapse, mean, resample, p05, p95, on (docs/analyses.md). Outputs in ANALYSIS/sweep: one table
    sorted by effect size, one plot, one JSON."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"levels": 50, "permutations": 2000}}

    seed: int = 0
    """Seed of the level draw, the resample-ablation draws, sampled actions, bootstrap and permutations."""
    arms: str = ",".join(DEFAULT_ARMS)
    """Arms, comma-separated: collapse, mean, resample, p05, p95, on (see docs/analyses.md)."""
    directions: str | None = None
    """Directions swept, as ids and ranges (e.g. 0:8,12; default: every direction of the basis)."""
    levels: int = 200
    """Paired levels, drawn from --split: every (direction, arm) and the baseline play each once."""
    levels_from: Path | None = None
    """Play the states of this level-state file as the paired levels (every state once per variant;
    --levels and --split unused): edited levels (proclab level edit) or recorded ones (level export)."""
    rows: int = 256
    """Episodes played at once: env slots stepped together, one batched agent forward per step."""
    permutations: int = 5000
    """Permutations of the paired tests' p-values."""
    correction: str = "holm"
    """Multiple-comparison correction over the directions: holm or bh (Benjamini-Hochberg)."""
    alpha: float = 0.05
    """Family-wise error rate (holm) or false discovery rate (bh) of each arm and metric."""
    sort: str = "return"
    """Table order: the size of the change in return, level_complete, length or tv_distance."""

    def check(self) -> None:
        self.require_positive("levels", "rows", "bootstrap", "permutations")
        check_system(self.basis)
        if self.correction not in CORRECTIONS:
            raise unknown_choice("--correction", self.correction, CORRECTIONS)
        if self.sort not in SORTS:
            raise unknown_choice("--sort", self.sort, SORTS)
        if not 0 < self.alpha < 1:
            raise ProclabError(f"--alpha must be in (0, 1), got {self.alpha}")
        parse_arms(self.arms)


@dataclass(frozen=True)
class Variants:
    """Variant 0 is the baseline; variant ``v >= 1`` holds ``direction[v]`` as ``arm[v]`` holds it,
    at ``values[v, l]`` on level ``l``."""

    direction: np.ndarray  # (V,) int, -1 for the baseline
    arm: list[str]
    values: np.ndarray  # (V, L)

    @classmethod
    def of(cls, directions: list[int], arms: tuple[str, ...], recorded: Recorded, levels: int, seed: int):
        rng = np.random.default_rng([seed, 3])
        direction, arm, values = [-1], ["baseline"], [np.zeros(levels)]
        for m in directions:
            for a in arms:
                direction.append(m)
                arm.append(a)
                values.append(recorded.held(a, m, levels, rng))
        return cls(np.array(direction, np.int64), arm, np.stack(values))


def sweep(
    agent,
    coords: Coordinates,
    key: str,
    recorded: Recorded,
    env,
    levels: np.ndarray,
    directions: list[int],
    config: SweepArgs,
    runtime,
    tick: Callable[[int], None] | None = None,
) -> tuple[dict, Outcomes, Variants]:
    """Play and test every (direction, arm) of ``config`` on ``levels`` of ``env``; returns the
    sweep's results (``sweep.json`` without the command's provenance), the outcomes and variants."""
    config.check()
    arms = parse_arms(config.arms)
    variants = Variants.of(directions, arms, recorded, len(levels), config.seed)
    held = held_agent(agent, coords, key)
    start = time.perf_counter()
    out = play(
        held,
        env,
        levels,
        variants.direction,
        variants.values,
        runtime,
        greedy=config.greedy,
        seed=config.seed,
        tick=tick,
    )
    played = time.perf_counter() - start
    names = _action_names(agent.config.num_actions)
    reports = compare(
        out,
        variants.arm,
        names,
        bootstrap=config.bootstrap,
        permutations=config.permutations,
        correction=config.correction,
        alpha=config.alpha,
        seed=config.seed,
    )
    results = []
    for v, rep in enumerate(reports, start=1):
        m = int(variants.direction[v])
        edit = recorded.placement(m, variants.values[v])
        results.append({"direction": m, "arm": variants.arm[v], "edit": edit, **rep})
    results.sort(key=lambda r: _effect(r, config.sort), reverse=True)
    steps = int(out.length.sum())
    summary = {
        "levels": [int(x) for x in levels],
        "directions": list(directions),
        "arms": {a: ARMS[a] for a in arms},
        "correction": _correction(config, len(directions)),
        "bootstrap": config.bootstrap,
        "greedy": config.greedy,
        "seed": config.seed,
        "sort": config.sort,
        "baseline": baseline_summary(out, names),
        "results": results,
        "significant": _significant(results, arms),
        "warning": off_data_warning({_label(r, coords): r["edit"] for r in results}),
        "episodes": int(out.ret.size),
        "steps": steps,
        "play_seconds": round(played, 3),
        "steps_per_second": round(steps / max(played, 1e-9), 1),
    }
    return summary, out, variants


def _action_names(num_actions: int) -> list[str]:
    from proclab.envs.actions import ACTION_NAMES

    return (
        list(ACTION_NAMES[:num_actions])
        if num_actions <= len(ACTION_NAMES)
        else [str(a) for a in range(num_actions)]
    )


def _effect(result: dict, sort: str) -> tuple[float, float]:
    """Sort key: the size of the change in ``sort``, then the TV distance."""
    size = result[TV]["value"] if sort == TV else abs(result[sort]["change"])
    return size, result[TV]["value"]


def _correction(config: SweepArgs, tests: int) -> dict:
    return {
        "method": config.correction,
        "name": CORRECTIONS[config.correction],
        "alpha": config.alpha,
        "family": "one arm and one metric over the swept directions",
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
    return f"{coords.label} {result['direction']} {result['arm']}"
