"""proclab: one toolkit for the whole life of an RL agent on OpenAI Procgen.

The public API (docs/api.md) is what this package exports; everything else is internal and may change::

    import proclab
    agent = proclab.load("coinrun/interpreting-rl-behavior")      # a run, a foreign checkpoint, a name
    ro = proclab.rollout(agent, levels="held-out", episodes=32, cache=["core.0.hook_h"], truth=True)
    edit = proclab.Intervention("torso.block1.hook_out", "channels 10,27", "set", 1.7)
    ro2 = proclab.rollout(agent, levels="held-out", episodes=32, interventions=[edit])
    settings = proclab.analyze.ProbeSettings(targets=("coin_dx",))
    proclab.analyze.probe(ro, "core.0.hook_h", settings=settings).table()      # every analysis: this shape
    proclab.stats.mcnemar(ro.goals["coin"], ro2.goals["coin"])        # statistics: intervals, tests, corrections

Names are imported when first used (PEP 562), so ``import proclab`` and ``proclab --help`` stay instant.
Layers (data flows left to right, lower layers never import higher ones; docs/architecture.md):
``errors, stats, envs, io, store, levels, run`` on the ground floor, then ``models -> rl -> record ->
worldmodel | reward -> interpret -> panel``, and this API, the CLI and the quickstart on top.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the lazy names, as type checkers see them (tests/test_api.py: the same as _EXPORTS')
    from proclab import analyze as analyze
    from proclab import stats as stats
    from proclab.errors import ProclabError as ProclabError
    from proclab.io.results import Result as Result
    from proclab.levels.level import Level as Level
    from proclab.models.agent import Agent as Agent
    from proclab.models.agent import build_agent as build_agent
    from proclab.models.cache import ActivationCache as ActivationCache
    from proclab.models.config import AgentConfig as AgentConfig
    from proclab.models.edited import AgentLike as AgentLike
    from proclab.models.edited import Intervened as Intervened
    from proclab.models.edited import hook_shapes as hook_shapes
    from proclab.models.edited import run_with_cache as run_with_cache
    from proclab.models.edited import run_with_hooks as run_with_hooks
    from proclab.models.interventions import All as All
    from proclab.models.interventions import Channels as Channels
    from proclab.models.interventions import Coordinates as Coordinates
    from proclab.models.interventions import Direction as Direction
    from proclab.models.interventions import Intervention as Intervention
    from proclab.models.interventions import Mask as Mask
    from proclab.models.interventions import Sites as Sites
    from proclab.models.interventions import Units as Units
    from proclab.models.loading import load as load
    from proclab.record.recording import RecordSettings as RecordSettings
    from proclab.record.recording import record_episodes as record_episodes
    from proclab.record.rollout import Rollout as Rollout
    from proclab.record.rollout import rollout as rollout
    from proclab.reward.nets import RewardModel as RewardModel
    from proclab.reward.record_demos import trex_demos as trex_demos
    from proclab.reward.train import train_trex as train_trex
    from proclab.rl.evaluate import EvalSettings as EvalSettings
    from proclab.rl.evaluations import Evaluations as Evaluations
    from proclab.rl.evaluations import evaluate_agents as evaluate_agents
    from proclab.rl.population import Population as Population
    from proclab.rl.population import PopulationSettings as PopulationSettings
    from proclab.rl.population import train_population as train_population
    from proclab.rl.ppo_train import train as train
    from proclab.run.tasks import TaskSettings as TaskSettings
    from proclab.worldmodel.checkpoint import TrainedWorldModel as TrainedWorldModel
    from proclab.worldmodel.dream import Dream as Dream
    from proclab.worldmodel.dream import dream as dream
    from proclab.worldmodel.trainer import train_world_model as train_world_model

__version__ = "0.2.0"

_EXPORTS = {
    # agents
    "load": "proclab.models.loading",
    "train": "proclab.rl.ppo_train",
    "Agent": "proclab.models.agent",
    "AgentConfig": "proclab.models.config",
    "build_agent": "proclab.models.agent",
    "train_population": "proclab.rl.population",
    "PopulationSettings": "proclab.rl.population",
    "Population": "proclab.rl.population",
    "evaluate_agents": "proclab.rl.evaluations",
    "Evaluations": "proclab.rl.evaluations",
    "EvalSettings": "proclab.rl.evaluate",
    "TaskSettings": "proclab.run.tasks",
    # playing
    "rollout": "proclab.record.rollout",
    "Rollout": "proclab.record.rollout",
    "Level": "proclab.levels.level",
    "record_episodes": "proclab.record.recording",
    "RecordSettings": "proclab.record.recording",
    # activations and edits
    "ActivationCache": "proclab.models.cache",
    "Intervention": "proclab.models.interventions",
    "Intervened": "proclab.models.edited",
    "AgentLike": "proclab.models.edited",
    "All": "proclab.models.interventions",
    "Channels": "proclab.models.interventions",
    "Sites": "proclab.models.interventions",
    "Units": "proclab.models.interventions",
    "Direction": "proclab.models.interventions",
    "Mask": "proclab.models.interventions",
    "Coordinates": "proclab.models.interventions",
    "hook_shapes": "proclab.models.edited",
    "run_with_cache": "proclab.models.edited",
    "run_with_hooks": "proclab.models.edited",
    # the world model and T-REX
    "train_world_model": "proclab.worldmodel.trainer",
    "TrainedWorldModel": "proclab.worldmodel.checkpoint",
    "dream": "proclab.worldmodel.dream",
    "Dream": "proclab.worldmodel.dream",
    "trex_demos": "proclab.reward.record_demos",
    "train_trex": "proclab.reward.train",
    "RewardModel": "proclab.reward.nets",
    # results and errors
    "Result": "proclab.io.results",
    "ProclabError": "proclab.errors",
}
_MODULES = {"analyze": "proclab.analyze", "stats": "proclab.stats"}

# made from the lazy names, which type checkers read from the imports above
__all__ = sorted([*_EXPORTS, *_MODULES, "__version__"])  # pyright: ignore[reportUnsupportedDunderAll]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    else:
        raise AttributeError(f"module 'proclab' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
