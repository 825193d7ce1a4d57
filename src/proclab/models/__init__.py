"""Agents: IMPALA torso, memory cores (none, gru, lstm, delta, srwm, fake_sr, sr_delta, no_carry_sr),
policy/value heads, and named hook points on every activation."""

from proclab.models.agent import Agent, AgentOutput, build_agent
from proclab.models.config import AGENT_PRESETS, STATELESS_CORES, AgentConfig, agent_preset
from proclab.models.cores import CORES
from proclab.models.hooks import Activations, HookPoint, capture, hook_points, patch

__all__ = [
    "AGENT_PRESETS",
    "CORES",
    "STATELESS_CORES",
    "Activations",
    "Agent",
    "AgentConfig",
    "AgentOutput",
    "HookPoint",
    "agent_preset",
    "build_agent",
    "capture",
    "hook_points",
    "patch",
]
