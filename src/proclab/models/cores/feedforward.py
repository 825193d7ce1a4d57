"""The ``none`` core: no memory; the heads read the torso features directly (Procgen paper, FF)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from proclab.models.cores.base import Core
from proclab.models.cores.registry import register_core

if TYPE_CHECKING:
    from proclab.models.config import AgentConfig


@register_core("none")
def build_none(config: AgentConfig, in_dim: int) -> Core:
    return Core(in_dim, [], out_dim=in_dim)
