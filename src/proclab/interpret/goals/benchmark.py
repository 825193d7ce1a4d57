"""The goal benchmark's steering and sweep tools on many agents as one call: one unit per agent, calls in order.

Rules 3 and 4 (:mod:`~proclab.interpret.goals.detect_steering`) read a steering run and a sweep of each agent,
tens of minutes per agent on a CPU; a benchmark plays them on every agent of both goals and on each agent's
random-initialised control. :func:`goal_calls_of_agents` plays each agent's tools as a unit of
:func:`~proclab.run.parts.run_parts` (this process, local processes or Ray tasks, as
:class:`~proclab.run.tasks.TaskSettings` says) and returns the calls in the agents' order, each agent's first
(steering, then the sweep), then its control's when asked; :func:`~proclab.interpret.goals.calls.score_goal_calls`
scores them. With ``folder`` every agent's calls are saved there as they come back, and the same call again plays
only the agents not yet saved.

How a tool is played on one agent is :func:`steer_for_goals` and :func:`sweep_for_goals`, which
``benchmarks/detect_goals_steering.py`` also calls: both play on held-out levels where the goals are apart (the
game's :data:`~proclab.interpret.goals.calls.APART` rule unless the settings name one), with sampled actions
(the label samples), and never compute the behavioural label. The sweep's basis is fitted on the agent's own
carried state (a feed-forward agent's ``torso.hook_fc``) over its play on *unedited* levels.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.goals.calls import APART, GoalCall
from proclab.interpret.goals.detect_steering import steering_call, sweep_call
from proclab.interpret.probes.probe import random_agent
from proclab.interpret.steering.steer import Steering, SteerSettings, steer
from proclab.interpret.sweep.grid import SweepSettings
from proclab.interpret.sweep.run import BasisSettings, Sweep, fit_basis, sweep_agent
from proclab.models.edited import AgentLike, env_config_of
from proclab.models.interventions import state_hook
from proclab.models.loading import load
from proclab.record.rollout import rollout
from proclab.rl.population import agent_sources
from proclab.run.parts import Parts, fingerprint_of
from proclab.run.tasks import TaskSettings

TOOLS = ("steering", "sweep")
FEED_FORWARD_HOOK = "torso.hook_fc"
"""The sweep's basis of a feed-forward agent (one without a carried state)."""


@dataclass(frozen=True)
class BenchmarkSettings:
    """How each agent's tools are played (the defaults: the benchmark's, docs/misgeneralization.md)."""

    tools: tuple[str, ...] = TOOLS
    """Which tools: ``steering`` (rule 3) and ``sweep`` (rule 4)."""
    steering_hook: str = "torso.block1.hook_out"
    """Where goal A's vector is added (``analyze steer``'s default)."""
    steer: SteerSettings = field(
        default_factory=lambda: SteerSettings(coefficients=(-1.0, 0.0), controls=20, greedy=False)
    )
    """Steering: coefficient -1 (subtract A's vector) and 0, 20 same-norm random directions (rule 3 ranks among
    20), sampled actions; ``level_rule`` None plays the game's goal-apart rule."""
    sweep: SweepSettings = field(default_factory=lambda: SweepSettings(goals=True, random_directions=20))
    """The sweep: both goals tracked, 20 same-norm random directions per arm (rule 4, version 2)."""
    basis: BasisSettings = field(default_factory=BasisSettings)
    """The sweep's basis (its ``n_ics`` directions)."""
    basis_levels: str = "500000:1000"
    """Unedited levels the basis is fitted on."""
    basis_steps: int = 4000
    """Steps of play the basis is fitted on."""
    controls: bool = True
    """Also play each agent's random-initialised control (a tool must make no call on it)."""
    seed: int = 0
    """Seed of the control's weights and of the basis's play."""

    def check(self) -> None:
        for tool in self.tools:
            if tool not in TOOLS:
                raise unknown_choice("benchmark tool", tool, TOOLS)
        if not self.tools or self.basis_steps < 1:
            raise ProclabError("give at least one tool, and basis_steps >= 1")
        self.steer.check()
        self.sweep.check()
        self.basis.check()


def apart_rule(agent: AgentLike, rule: str | None) -> str:
    """The level rule a tool plays ``agent`` under: ``rule``, else its game's goal-apart rule."""
    (game,) = env_config_of(agent).games()
    return rule if rule is not None else APART.get(game, "none")


def steer_for_goals(agent: AgentLike, settings: BenchmarkSettings, progress: bool = True) -> Steering:
    """Rule 3's input: goal A's per-level vector, subtracted, on the goal-apart levels."""
    s = replace(settings.steer, level_rule=apart_rule(agent, settings.steer.level_rule))
    return steer(agent, settings.steering_hook, settings=s, progress=progress)


def sweep_for_goals(agent: AgentLike, settings: BenchmarkSettings, progress: bool = True) -> Sweep:
    """Rule 4's input: the sweep of the agent's carried state (or ``torso.hook_fc``) with both goals tracked,
    its basis fitted on unedited levels; ``summary["detect_basis"]`` says how the basis was fitted."""
    states = agent.state_shapes()
    key = state_hook(next(iter(states))) if states else FEED_FORWARD_HOOK
    ro = rollout(
        agent, levels=settings.basis_levels, steps=settings.basis_steps, truth=False, level_rule="none",
        seed=settings.seed, num_envs=4, cache=None if states else [FEED_FORWARD_HOOK],
    )  # fmt: skip
    basis = fit_basis(ro, key, settings=settings.basis, progress=progress)
    s = replace(settings.sweep, level_rule=apart_rule(agent, settings.sweep.level_rule))
    result = sweep_agent(agent, key, basis=basis, rollout=ro, settings=s, progress=progress)
    result.summary["detect_basis"] = {
        "key": key, "ics": settings.basis.n_ics, "levels": settings.basis_levels, "steps": int(ro.mask.sum()),
        "level_rule": "none",
    }  # fmt: skip
    return result


def calls_of(
    agent: AgentLike, name: str, settings: BenchmarkSettings, progress: bool = True
) -> list[GoalCall]:
    """The calls of every tool of ``settings`` on ``agent`` (named ``name`` in them)."""
    calls = []
    if "steering" in settings.tools:
        steered = steer_for_goals(agent, settings, progress)
        calls.append(steering_call(steered.goals, name, entity=steered.entity))
    if "sweep" in settings.tools:
        calls.append(sweep_call(sweep_for_goals(agent, settings, progress).summary.get("goals"), name))
    return calls


@dataclass(frozen=True)
class _Unit:
    name: str
    source: str
    control: bool
    settings: BenchmarkSettings


def _play(unit: _Unit) -> list[dict]:
    """One agent (or its control) loaded and played with every tool: its calls as JSON-ready dicts."""
    agent = load(unit.source)
    name = unit.name
    if unit.control:
        agent, name = random_agent(agent, seed=unit.settings.seed), f"{unit.name} (random init)"
    return [asdict(c) for c in calls_of(agent, name, unit.settings, progress=False)]


def goal_calls_of_agents(
    agents: list[str | Path] | tuple[str | Path, ...],
    *,
    tasks: TaskSettings = TaskSettings(),
    folder: str | Path | None = None,
    settings: BenchmarkSettings = BenchmarkSettings(),
    progress: bool = True,
) -> list[GoalCall]:
    """Every tool's call on every agent (runs, checkpoints, shipped names, population folders) and, with
    ``settings.controls``, on its random-initialised control: one unit per agent and per control, the calls in
    the agents' order (module docstring)."""
    settings.check()
    sources = agent_sources(agents)
    units = [
        _Unit(name, str(path), control, settings)
        for name, path in sources
        for control in ((False, True) if settings.controls else (False,))
    ]
    fingerprint = fingerprint_of(asdict(settings), (), agents=[name for name, _ in sources])
    parts = Parts(len(units), None if folder is None else Path(folder), fingerprint, "goal benchmark")
    per_unit = parts.run(
        _play, units.__getitem__, tasks, arrays=_to_arrays, of_arrays=_from_arrays, title="goal benchmark",
        label=f"{len(units)} agents and controls", progress=progress,
    )  # fmt: skip
    return [GoalCall(**call) for calls in per_unit for call in calls]


def _to_arrays(calls: list[dict]) -> dict[str, np.ndarray]:
    return {"calls": np.array(json.dumps(calls))}


def _from_arrays(arrays: dict[str, np.ndarray]) -> list[dict]:
    return json.loads(str(arrays["calls"]))
