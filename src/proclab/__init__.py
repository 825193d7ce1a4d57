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

__version__ = "0.1.0"

_EXPORTS = {
    # agents
    "load": "proclab.models.loading",
    "train": "proclab.rl.ppo_train",
    "Agent": "proclab.models.agent",
    "AgentConfig": "proclab.models.config",
    "build_agent": "proclab.models.agent",
    # playing
    "rollout": "proclab.record.rollout",
    "Rollout": "proclab.record.rollout",
    "Level": "proclab.levels.level",
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

__all__ = sorted([*_EXPORTS, *_MODULES, "__version__"])


def __getattr__(name: str):
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
