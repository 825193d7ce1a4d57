"""Which goal does an agent pursue, according to one tool: the goal-detection benchmark's calls from the result a
notebook already holds (:func:`goal_calls`, ``proclab.analyze.goal_calls``).

The rules themselves (docs/misgeneralization.md, fixed before any result) live beside this module and read the
raw blocks of the results: :mod:`~proclab.interpret.goals.detect_probes` (rules 1 and 2) and
:mod:`~proclab.interpret.goals.detect_steering` (rules 3 and 4). This entry point only picks the rule a result
supports, so a researcher who has probed, steered or swept an agent asks "what does that say about its goal?"
without knowing which block each rule reads::

    settings = proclab.analyze.ProbeSettings(targets=proclab.analyze.goal_targets("maze"))
    probes = proclab.analyze.probe(ro, "core.0.hook_h", settings=settings)
    proclab.analyze.goal_calls(probes, "my agent")  # [GoalCall(tool='probes', call='cheese' | 'corner' | 'none')]
"""

from __future__ import annotations

from proclab.envs.state.goals import GOALS
from proclab.errors import ProclabError
from proclab.interpret.goals.calls import GoalCall
from proclab.interpret.goals.detect_probes import goal_targets, probe_call, tracking_call
from proclab.interpret.goals.detect_steering import steering_call, sweep_call
from proclab.interpret.probes.probe import Probes
from proclab.interpret.steering.steer import Steering
from proclab.interpret.sweep.run import Sweep


def goal_calls(result: Probes | Steering | Sweep, agent: str) -> list[GoalCall]:
    """The calls ``result`` supports, each with the numbers its rule read (``agent`` names the agent in them).

    * :class:`~proclab.interpret.probes.probe.Probes`: rule 1 if it probed the four :func:`goal_targets` of a
      game with two goals, against the rule's controls (``ProbeSettings``'s default controls include them); rule 2 if it tracked
      both goals' entities against the random agent; both when it holds both.
    * :class:`~proclab.interpret.steering.steer.Steering` of goal A's vector with coefficient -1 and same-norm
      random directions: rule 3.
    * :class:`~proclab.interpret.sweep.run.Sweep` played with ``goals=True``: rule 4.

    A result that supports no rule is refused with what it lacks, never answered with "no call": an
    abstention is a finding, a missing input is not.
    """
    if isinstance(result, Probes):
        return _probe_calls(result, agent)
    if isinstance(result, Steering):
        return [steering_call(result.goals, agent, entity=result.entity)]
    if isinstance(result, Sweep):
        return [sweep_call(result.summary.get("goals"), agent)]
    raise ProclabError(f"goal_calls reads a Probes, Steering or Sweep result, not {type(result).__name__}")


def _probe_calls(result: Probes, agent: str) -> list[GoalCall]:
    calls = []
    for game, goals in GOALS.items():
        if any(t in result.probes for t in goal_targets(game)):
            calls.append(probe_call(result.probes, game, agent))
        if any(g in result.tracking for g in goals):
            calls.append(tracking_call(result.tracking, game, agent))
    if not calls:
        wanted = "; ".join(f"{game}: targets {', '.join(goal_targets(game))} or entities {a}, {b}"
                           for game, (a, b) in GOALS.items())  # fmt: skip
        raise ProclabError(f"these probes hold no goal the benchmark's rules read ({wanted})")
    return calls


__all__ = ["goal_calls"]
