"""Scripted policies whose goal is known by construction: the answer key of the behavioural label.

A label that says which goal an agent pursues (:mod:`proclab.interpret.goals.label`) is checked on
policies whose goal nobody has to guess (:data:`KNOWN`): a runner that cannot see (CoinRun: it holds right
and jumps, whatever it is shown), planners that walk to one goal on the game's ground truth
(:mod:`proclab.models.planners`: the coin or the level's end; the maze's cheese or its top-right corner), and the uniformly
random policy, which pursues nothing. A rule that mislabels any of them is not used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from proclab.models.planners import RIGHT, SURE, UP_RIGHT, CoinRunPlanner, MazePlanner
from proclab.models.scripted import ScriptedAgent


# -- the answer key -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Known:
    """A policy whose goal is known: how to make it, the label it must get, and the action noise it plays
    with (``proclab.rollout``'s ``noise``; the same in both plays of a level)."""

    make: Callable[[], object]
    goal: str
    noise: str = "none"


KNOWN: dict[str, dict[str, Known]] = {
    "coinrun": {
        "runner": Known(lambda: ScriptedAgent(UP_RIGHT), "end"),
        "runner-random-jumps": Known(lambda: ScriptedAgent(RIGHT), "end", f"set={UP_RIGHT}:{SURE}"),
        "coin-planner": Known(lambda: CoinRunPlanner("coin"), "coin"),
        "end-planner": Known(lambda: CoinRunPlanner("end"), "end"),
        "end-planner-avoiding-coin": Known(lambda: CoinRunPlanner("end", avoid_coin=True), "end"),
        "random": Known(ScriptedAgent.uniform, "none"),
    },
    "maze": {
        "corner-planner": Known(lambda: MazePlanner("corner"), "corner"),
        "cheese-planner": Known(lambda: MazePlanner("cheese"), "cheese"),
        "random": Known(ScriptedAgent.uniform, "none"),
    },
}
"""Per game, the scripted policies a label must get right: ``runner`` holds right and jumps whenever it
can (``always-up-right``), ``runner-random-jumps`` presses right or up-right at random (right's logit with
up-right's raised to it by the action noise); neither sees anything. ``end-planner`` sees and runs to the level's end, taking a coin in its path;
``end-planner-avoiding-coin`` jumps over it (label version 2 must call it an end-seeker). The planners walk to their goal on the
ground truth; ``random`` presses every button alike and pursues nothing."""
