"""The sweep on objects: any agent in memory, a basis of one of its state tensors, the states it was fitted on.

``proclab analyze sweep`` reads all of these from an analysis folder; :func:`sweep_agent` takes them as
objects, so a notebook can sweep an agent whose weights it just edited::

    basis = proclab.analyze.fit_basis(ro, "core.0.hook_h", settings=proclab.analyze.BasisSettings(n_ics=8))
    settings = proclab.analyze.SweepSettings(levels=50, arms="mean,p05,p95")
    res = proclab.analyze.sweep(agent, "core.0.hook_h", basis=basis, rollout=ro, settings=settings)
    res.table()

The numbers are those of :func:`proclab.interpret.sweep.grid.sweep` (paired levels, batched play, corrected
paired tests; docs/analyses.md): the recorded distribution every arm is placed in is the basis's
coordinates of the rollout's states, the start coordinates those of the agent's initial state.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from proclab.envs import agent_split, distinct_levels
from proclab.envs.rules import with_rule
from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.bases.activations import HOOK, hook_key, rollout_activations
from proclab.interpret.bases.coordinates import LinearCoordinates
from proclab.interpret.bases.pca_ica import CONTRASTS, Basis, BasisConfig, Kind
from proclab.interpret.bases.random_directions import WithRandom
from proclab.interpret.interventions.arms import Recorded, parse_arms
from proclab.interpret.interventions.batched_play import ProcgenLevels
from proclab.interpret.interventions.goal_watch import GoalWatch
from proclab.interpret.sweep.grid import SweepSettings, sweep
from proclab.interpret.workspace.selection import parse_ids
from proclab.io.progress import analysis_phases
from proclab.io.results import Result
from proclab.models.edited import AgentLike, env_config_of
from proclab.run.runtime import Runtime, make_runtime

if TYPE_CHECKING:
    from proclab.record.rollout import Rollout


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


@dataclass(frozen=True)
class BasisSettings(BasisConfig):
    """How :func:`fit_basis` fits: the basis's own config (``n_ics`` is ``analyze hidden``'s ``--n-ics``),
    validated."""

    def check(self) -> None:
        if self.n_ics < 1 or self.max_iter < 1 or not self.tol > 0:
            raise ProclabError(
                f"need n_ics >= 1, max_iter >= 1 and tol > 0; got {self.n_ics}, {self.max_iter}, {self.tol}"
            )
        if self.fun not in CONTRASTS:
            raise unknown_choice("FastICA contrast", self.fun, CONTRASTS)


def fit_basis(
    rollout: Rollout, hook: str, *, settings: BasisSettings = BasisSettings(), progress: bool = True
) -> Basis:
    """The PCA/ICA basis of hook point ``hook`` over the rollout's played steps (``analyze hidden``'s fit,
    without its outlier removal: fit on the states you mean). ``progress``: show the fit as it runs."""
    settings.check()
    acts = rollout_activations(rollout, hook)
    with analysis_phases(progress, 1, "basis") as ph, ph.phase(f"basis of {len(acts)} states"):
        config = BasisConfig(**asdict(settings))  # a basis records its config as a BasisConfig
        return Basis.fit(acts.x.astype(np.float64), config, {"activation": acts.source})


def sweep_agent(
    agent: AgentLike,
    hook: str,
    *,
    basis: Basis,
    rollout: Rollout,
    runtime: Runtime | None = None,
    settings: SweepSettings = SweepSettings(),
    progress: bool = True,
) -> Sweep:
    """Sweep ``agent`` (any agent in memory) along the ``settings.kind`` coordinates of ``basis`` (fitted on hook
    point ``hook``: a recurrent state's, held in the state, or any other); ``rollout``'s cache of ``hook`` is
    the recorded distribution; played on ``runtime`` (default: the agent's). ``progress``: show the share of
    episodes played."""
    settings.check()
    if settings.parts != 1 or settings.levels_from is not None:
        raise ProclabError(
            "a sweep in memory plays its levels in one part (parts=1, no levels_from); analyze sweep plays "
            "them in parts or from a level-state file"
        )
    config = settings
    coords = LinearCoordinates(basis, cast(Kind, settings.kind))  # one of KINDS: settings.check()
    key = hook_key(hook, agent)
    states = rollout_activations(rollout, hook).x.astype(np.float64)
    if key.startswith(HOOK):  # no start state at a hook: collapse holds the coordinate of zero activation
        start = np.zeros((1, states.shape[1]))
    else:
        start = agent.initial_state(1)[key].reshape(1, -1).double().cpu().numpy()
    chosen = (
        list(range(coords.k))
        if settings.directions is None
        else parse_ids(settings.directions, coords.k, "direction")
    )
    rec = Recorded(coords.encode(states), coords.encode(start)[0])
    if settings.random_directions:  # same-norm controls, swept after the basis's own as the command does
        coords = WithRandom.draw(coords, settings.random_directions, settings.seed)
        rec = Recorded(
            np.concatenate([rec.values, coords.project(states)], axis=1),
            np.concatenate([rec.start, coords.project(start)[0]]),
        )
        chosen += list(range(coords.first, coords.k))
    env_config = env_config_of(agent)
    levels = distinct_levels(agent_split(config.split, env_config.split), config.levels, config.seed)
    rt = runtime or getattr(agent, "runtime", None) or make_runtime("cpu", "fp32")
    episodes = len(levels) * (1 + len(chosen) * len(parse_arms(config.arms)))
    env = ProcgenLevels(with_rule(env_config, config.level_rule), min(config.rows, episodes), config.seed)
    goals = GoalWatch.of(env) if config.goals else None
    try:
        with analysis_phases(progress, 1, "sweep") as ph, ph.phase(f"{episodes} episodes"):
            swept = sweep(
                agent, coords, key, rec, env, levels, chosen, config, rt, ph.counter(episodes), states,
                goals=goals,
            )  # fmt: skip
    finally:
        env.close()
    assert swept is not None  # one part (checked above) is the whole sweep
    summary, out, _ = swept
    outcomes = {"ret": out.ret, "level_complete": out.complete, "length": out.length, "actions": out.actions}
    return Sweep(summary, outcomes)
