"""Fixtures for the agent tests: tiny configurations of every core, random inputs and states."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from proclab.models import AgentConfig, build_agent

TINY = AgentConfig(
    widths=(4, 8, 8),
    fc=16,
    hidden=16,
    num_layers=2,
    num_heads=4,
    head_dim=4,
    ff=24,
    rnn_size=12,
    prev_reward=True,
)


def _tiny_config(core: str, **overrides) -> AgentConfig:
    return replace(TINY, core=core, **overrides)


def _tiny_agent(core: str, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    return build_agent(_tiny_config(core, **overrides))


def _random_inputs(T: int, B: int, seed: int = 1, reset_prob: float = 0.3):
    """uint8 frames (T, B, 3, 64, 64), firsts (T, B) with resets mid-sequence, rewards (T, B)."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randint(0, 256, (T, B, 3, 64, 64), dtype=torch.uint8, generator=g)
    firsts = torch.rand(T, B, generator=g) < reset_prob
    firsts[0, 0] = True
    firsts[T // 2, B - 1] = True  # at least one reset in the middle of the sequence
    rewards = torch.randn(T, B, generator=g) * 2  # some beyond the clamp range
    return obs, firsts, rewards


def _random_state(agent, B: int, seed: int = 2, scale: float = 0.3):
    """A non-trivial incoming state (random values instead of the zero initial state)."""
    g = torch.Generator().manual_seed(seed)
    return {k: torch.randn(B, *s, generator=g) * scale for k, s in agent.state_shapes().items()}


@pytest.fixture
def tiny_config():
    return _tiny_config


@pytest.fixture
def tiny_agent():
    return _tiny_agent


@pytest.fixture
def random_inputs():
    return _random_inputs


@pytest.fixture
def random_state():
    return _random_state
