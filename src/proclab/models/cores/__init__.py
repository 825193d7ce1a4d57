"""Memory cores, selected by name: ``none``, ``gru``, ``lstm``, ``delta``, ``srwm``, ``fake_sr``,
``sr_delta``, ``no_carry_sr``. One small module per family; the registry maps names to builders.
"""

from proclab.models.cores import fast_weight, feedforward, recurrent, self_referential  # noqa: F401 (register)
from proclab.models.cores.base import Core, MemoryLayer, scan
from proclab.models.cores.registry import CORES, build_core, register_core

__all__ = ["CORES", "Core", "MemoryLayer", "build_core", "register_core", "scan"]
