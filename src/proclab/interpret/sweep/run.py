"""The sweep on objects: any agent in memory, a basis of one of its state tensors, the states it was fitted on.

``proclab analyze sweep`` reads all of these from an analysis folder; :func:`sweep_agent` takes them as
objects, so a notebook can sweep an agent whose weights it just edited::

    basis = proclab.analyze.fit_basis(ro, "core.0.hook_h", n_ics=8)
    res = proclab.analyze.sweep(agent, basis, ro, "core.0.hook_h", levels=50, arms="mean,p05,p95")
    res.table()

The numbers are those of :func:`proclab.interpret.sweep.grid.sweep` (paired levels, batched play, corrected
paired tests; docs/analyses.md): the recorded distribution every arm is placed in is the basis's
coordinates of the rollout's states, the start coordinates those of the agent's initial state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from proclab.envs import distinct_levels, parse_split
from proclab.envs.rules import with_rule
from proclab.errors import ProclabError
from proclab.interpret.bases.activations import HOOK, hook_key, rollout_activations
from proclab.interpret.bases.coordinates import LinearCoordinates
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.interventions.arms import Recorded, parse_arms
from proclab.interpret.interventions.batched_play import ProcgenLevels
from proclab.interpret.interventions.goal_watch import GoalWatch
from proclab.interpret.sweep.grid import SweepSettings, sweep
from proclab.interpret.workspace.selection import parse_ids
from proclab.io.results import Result
from proclab.run.runtime import make_runtime


@dataclass(frozen=True)
class Sweep(Result):
    """Every (direction, arm) against the plain agent on paired levels: the sweep's summary (``results`` one
    row per variant, ``claims`` per direction, the correction, the levels) and the raw outcomes."""

    summary: dict
    outcomes: dict = field(repr=False)

    def table(self) -> list[dict]:
        rows = []
        for r in self.summary["results"]:
            rows.append({
                "direction": r["direction"],
                "arm": r["arm"],
                "return change": r["return"]["change"],
                "ci": tuple(r["return"]["ci95"]),
                "p (adjusted)": r["return"]["p_adjusted"],
                "significant": r["return"]["significant"],
                "off data": r["edit"].get("off_data"),
            })  # fmt: skip
        return rows


def fit_basis(rollout, hook: str = "core.0.hook_h", n_ics: int = 16, seed: int = 0) -> Basis:
    """The PCA/ICA basis of hook point ``hook`` over the rollout's played steps (``analyze hidden``'s fit,
    without its outlier removal: fit on the states you mean)."""
    acts = rollout_activations(rollout, hook)
    return Basis.fit(
        acts.x.astype(np.float64), BasisConfig(n_ics=n_ics, seed=seed), {"activation": acts.source}
    )


def sweep_agent(
    agent,
    basis: Basis,
    rollout,
    hook: str = "core.0.hook_h",
    *,
    kind: str = "ica",
    directions: str | None = None,
    runtime=None,
    **options,
) -> Sweep:
    """Sweep ``agent`` (any agent in memory) along the ``kind`` coordinates of ``basis`` (fitted on hook point
    ``hook``: a recurrent state's, held in the state, or any other); ``rollout``'s cache of ``hook`` is the
    recorded distribution. ``options`` are the sweep's
    (``arms``, ``levels``, ``split``, ``rows``, ``permutations``, ``bootstrap``, ``seed``, ``greedy``,
    ``level_rule`` (default: the agent's own), ``goals`` (both goals per episode), ..., as ``proclab analyze
    sweep`` names them)."""
    config = SweepSettings(**options)
    config.check()
    if config.parts != 1:
        raise ProclabError(
            "a sweep in memory plays in one part (parts=1); use analyze sweep to play in parts"
        )
    coords = LinearCoordinates(basis, kind)
    key = hook_key(hook, agent)
    states = rollout_activations(rollout, hook).x.astype(np.float64)
    if key.startswith(HOOK):  # no start state at a hook: collapse holds the coordinate of zero activation
        start = np.zeros((1, states.shape[1]))
    else:
        start = agent.initial_state(1)[key].reshape(1, -1).double().cpu().numpy()
    rec = Recorded(coords.encode(states), coords.encode(start)[0])
    every = list(range(coords.k))
    chosen = every if directions is None else parse_ids(directions, coords.k, "direction")
    levels = distinct_levels(parse_split(config.split), config.levels, config.seed)
    rt = runtime or getattr(agent, "runtime", None) or make_runtime("cpu", "fp32")
    episodes = len(levels) * (1 + len(chosen) * len(parse_arms(config.arms)))
    env = ProcgenLevels(
        with_rule(agent.env_config, config.level_rule), min(config.rows, episodes), config.seed
    )
    goals = GoalWatch.of(env) if config.goals else None
    try:
        summary, out, _ = sweep(
            agent, coords, key, rec, env, levels, chosen, config, rt, states=states, goals=goals
        )
    finally:
        env.close()
    outcomes = {"ret": out.ret, "level_complete": out.complete, "length": out.length, "actions": out.actions}
    return Sweep(summary, outcomes)
