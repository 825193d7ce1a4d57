"""``proclab.analyze``: the analyses as functions on objects, each returning a typed result.

Every function takes what a notebook holds (an agent, a :class:`~proclab.record.rollout.Rollout`, a basis)
and returns a :class:`~proclab.io.results.Result` (``.table()``, ``.plot()``, ``.save(folder)``); the
``proclab analyze`` commands call the same code on recorded stores and analysis folders::

    ro = proclab.rollout(agent, levels="test1", episodes=32, cache=["core.0.hook_h"])
    proclab.analyze.probe(ro, "core.0.hook_h", ["coin_dx", "agent_x"]).table()
    proclab.analyze.steer(agent, proclab.analyze.SteerSettings(levels=50)).table()
    basis = proclab.analyze.fit_basis(ro, "core.0.h", n_ics=8)
    proclab.analyze.sweep(agent, basis, ro, "core.0.h", levels=50).table()
"""

from proclab.interpret.probes.probe import Probes, ProbeSettings, probe, random_agent
from proclab.interpret.steering.steer import Steering, SteerSettings, steer
from proclab.interpret.sweep.run import Sweep, fit_basis
from proclab.interpret.sweep.run import sweep_agent as sweep

__all__ = [
    "ProbeSettings",
    "Probes",
    "SteerSettings",
    "Steering",
    "Sweep",
    "fit_basis",
    "probe",
    "random_agent",
    "steer",
    "sweep",
]
