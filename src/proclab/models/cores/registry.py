"""The core registry: a name in :class:`~proclab.models.AgentConfig` -> a function building the core.

Each core family module registers its builders with :func:`register_core`; the package's
``__init__`` imports every family so that the registry is complete once ``proclab.models.cores``
is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from proclab.errors import unknown_choice

if TYPE_CHECKING:
    from proclab.models.config import AgentConfig
    from proclab.models.cores.base import Core

CoreBuilder = Callable[["AgentConfig", int], "Core"]
"""``builder(config, in_dim) -> Core``; ``in_dim`` is the torso's feature width."""

CORES: dict[str, CoreBuilder] = {}


def register_core(name: str) -> Callable[[CoreBuilder], CoreBuilder]:
    def decorate(builder: CoreBuilder) -> CoreBuilder:
        if name in CORES:
            raise ValueError(f"core {name!r} registered twice")
        CORES[name] = builder
        return builder

    return decorate


def build_core(config: AgentConfig, in_dim: int) -> Core:
    if config.core not in CORES:
        raise unknown_choice("agent core", config.core, CORES)
    return CORES[config.core](config, in_dim)
