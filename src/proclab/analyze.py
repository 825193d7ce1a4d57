"""``proclab.analyze``: the analyses as functions on objects, each returning a typed result.

Every analysis has one call shape: ``analyze.X(subject, hook, *, <the other objects it needs>,
settings=XSettings(...), progress=True)``. The subject is what a notebook holds (an agent or a
:class:`~proclab.record.rollout.Rollout`; where an analysis reads neither, its own subject: a world model's
sample store, maze episodes, a reward model, a world model); ``hook`` (a hook name, ``"core.0.hook_h"``) comes
second wherever activations are read; every other object (``basis=``, ``rollout=``, ``sweep=``, ``agent=``,
...) is keyword-only; every option is a field of the analysis' frozen settings dataclass (``check()``
validates it); ``progress`` shows the analysis' phases on the console (False: quiet). Each returns a
:class:`~proclab.io.results.Result` (``.table()``, ``.plot()``, ``.save(folder)``, ``X.load(folder)``); the
``proclab analyze`` commands call the same code on recorded stores and analysis folders::

    A = proclab.analyze
    ro = proclab.rollout(agent, levels="held-out", episodes=32, cache=["core.0.hook_h"], truth=True)
    A.probe(ro, "core.0.hook_h", settings=A.ProbeSettings(targets=("coin_dx", "agent_x"))).table()
    A.steer(agent, "torso.block1.hook_out", settings=A.SteerSettings(levels=50)).table()
    states = A.hidden(ro, "core.0.hook_h", settings=A.HiddenSettings(n_ics=8))
    swept = A.sweep(agent, "core.0.hook_h", basis=states.basis, rollout=ro, settings=A.SweepSettings(levels=50))
    A.saliency(agent, rollout=ro, basis=states.basis, settings=A.SaliencySettings(targets=("value", "ic:0"))).plot()
    A.atlas(agent, "core.0.hook_h", basis=states.basis, rollout=ro, sweep=swept).table()
    A.behaviours(samples, settings=A.BehaviourSettings(clusters=8)).table()
    mazes = A.maze_episodes(proclab.rollout(maze_agent, levels="2000000:1000000", episodes=64, truth=True))
    A.decision_square(mazes, settings=A.DecisionSquareSettings(horizon=256)).plot()
    probes = A.probe(ro, "core.0.hook_h", settings=A.ProbeSettings(targets=A.goal_targets("coinrun")))
    probes.save("probes"); A.Probes.load("probes")           # results round-trip through their folders
    calls = A.goal_calls(probes, "my agent")  # which goal: coin, end, or no call
    label = A.goal_label(agent, settings=A.LabelSettings(episodes=200))  # the answer key: what it pursues
    A.score_goal_calls(calls, labels={"my agent": label.label})  # hits, misses, abstentions
"""

from proclab.interpret.atlas.build import Atlas, AtlasSettings, atlas
from proclab.interpret.behaviours.grouping import Behaviours, BehaviourSettings, behaviours
from proclab.interpret.goals.benchmark import BenchmarkSettings, goal_calls_of_agents
from proclab.interpret.goals.calls import GoalCall, ToolScore, score_goal_calls
from proclab.interpret.goals.decision import DecisionSquare, DecisionSquareSettings, decision_square
from proclab.interpret.goals.detect import goal_calls
from proclab.interpret.goals.detect_probes import goal_targets
from proclab.interpret.goals.episodes import maze_episodes
from proclab.interpret.goals.label import GoalLabel, LabelSettings, goal_label
from proclab.interpret.probes.agents import ProbeAgentsSettings, ProbesByAgent, probe_agents
from proclab.interpret.probes.probe import Probes, ProbeSettings, probe, random_agent
from proclab.interpret.saliency.real_frames import Saliency, SaliencySettings, saliency
from proclab.interpret.states.hidden import Hidden, HiddenSettings, hidden
from proclab.interpret.steering.steer import Steering, SteerSettings, steer
from proclab.interpret.sweep.run import BasisSettings, Sweep, SweepSettings, fit_basis
from proclab.interpret.sweep.run import sweep_agent as sweep
from proclab.reward.evaluation import TrexEvaluation, TrexEvaluationSettings, evaluate_trex
from proclab.worldmodel.evaluation import EvaluationSettings, WorldModelEvaluation, evaluate_world_model

__all__ = [
    "Atlas",
    "AtlasSettings",
    "BasisSettings",
    "BehaviourSettings",
    "Behaviours",
    "BenchmarkSettings",
    "DecisionSquare",
    "DecisionSquareSettings",
    "EvaluationSettings",
    "GoalCall",
    "GoalLabel",
    "Hidden",
    "HiddenSettings",
    "LabelSettings",
    "ProbeAgentsSettings",
    "ProbeSettings",
    "Probes",
    "ProbesByAgent",
    "Saliency",
    "SaliencySettings",
    "SteerSettings",
    "Steering",
    "Sweep",
    "SweepSettings",
    "ToolScore",
    "TrexEvaluation",
    "TrexEvaluationSettings",
    "WorldModelEvaluation",
    "atlas",
    "behaviours",
    "decision_square",
    "evaluate_trex",
    "evaluate_world_model",
    "fit_basis",
    "goal_calls",
    "goal_calls_of_agents",
    "goal_label",
    "goal_targets",
    "hidden",
    "maze_episodes",
    "probe",
    "probe_agents",
    "random_agent",
    "saliency",
    "score_goal_calls",
    "steer",
    "sweep",
]
