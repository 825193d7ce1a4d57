"""``proclab.analyze``: the analyses as functions on objects, each returning a typed result.

Every function takes what a notebook holds (an agent, a :class:`~proclab.record.rollout.Rollout`, a basis, a
world model's sample store) and returns a :class:`~proclab.io.results.Result` (``.table()``, ``.plot()``,
``.save(folder)``); the ``proclab analyze`` commands call the same code on recorded stores and analysis
folders::

    ro = proclab.rollout(agent, levels="held-out", episodes=32, cache=["core.0.hook_h"], truth=True)
    proclab.analyze.probe(ro, "core.0.hook_h", ["coin_dx", "agent_x"]).table()
    proclab.analyze.steer(agent, proclab.analyze.SteerSettings(levels=50)).table()
    states = proclab.analyze.hidden(ro, "core.0.hook_h", proclab.analyze.HiddenSettings(n_ics=8))
    swept = proclab.analyze.sweep(agent, states.basis, ro, "core.0.hook_h", levels=50)
    proclab.analyze.saliency(agent, ro, ["value", "ic:0"], basis=states.basis).plot()
    proclab.analyze.atlas(agent, states.basis, ro, "core.0.hook_h", sweep=swept).table()
    proclab.analyze.behaviours(samples, proclab.analyze.BehaviourSettings(clusters=8)).table()
    mazes = proclab.analyze.maze_episodes(proclab.rollout(maze_agent, levels="2000000:1000000", episodes=64))
    proclab.analyze.decision_square(mazes, proclab.analyze.DecisionSquareSettings(horizon=256)).plot()
    probes = proclab.analyze.probe(ro, "core.0.hook_h", proclab.analyze.goal_targets("coinrun"))
    calls = proclab.analyze.goal_calls(probes, "my agent")  # which goal: coin, end, or no call
    proclab.analyze.score_goal_calls(calls, labels={"my agent": "coin"})  # hits, misses, abstentions
"""

from proclab.interpret.atlas.build import Atlas, AtlasSettings, atlas
from proclab.interpret.behaviours.grouping import Behaviours, BehaviourSettings, behaviours
from proclab.interpret.goals.calls import GoalCall, ToolScore, score_goal_calls
from proclab.interpret.goals.decision import DecisionSquare, DecisionSquareSettings, decision_square
from proclab.interpret.goals.detect import goal_calls
from proclab.interpret.goals.detect_probes import goal_targets
from proclab.interpret.goals.episodes import maze_episodes
from proclab.interpret.probes.probe import Probes, ProbeSettings, probe, random_agent
from proclab.interpret.saliency.real_frames import Saliency, SaliencySettings, saliency
from proclab.interpret.states.hidden import Hidden, HiddenSettings, hidden
from proclab.interpret.steering.steer import Steering, SteerSettings, steer
from proclab.interpret.sweep.run import Sweep, fit_basis
from proclab.interpret.sweep.run import sweep_agent as sweep
from proclab.reward.evaluation import TrexEvaluation, evaluate_trex
from proclab.worldmodel.evaluation import EvaluationSettings, WorldModelEvaluation, evaluate_world_model

__all__ = [
    "Atlas",
    "AtlasSettings",
    "BehaviourSettings",
    "Behaviours",
    "DecisionSquare",
    "DecisionSquareSettings",
    "EvaluationSettings",
    "GoalCall",
    "Hidden",
    "HiddenSettings",
    "ProbeSettings",
    "Probes",
    "Saliency",
    "SaliencySettings",
    "SteerSettings",
    "Steering",
    "Sweep",
    "ToolScore",
    "TrexEvaluation",
    "WorldModelEvaluation",
    "atlas",
    "behaviours",
    "decision_square",
    "evaluate_trex",
    "evaluate_world_model",
    "fit_basis",
    "goal_calls",
    "goal_targets",
    "hidden",
    "maze_episodes",
    "probe",
    "random_agent",
    "saliency",
    "score_goal_calls",
    "steer",
    "sweep",
]
