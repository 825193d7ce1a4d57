"""Stand-in agents for the simulator's loop.

To show that the environment model does not depend on the agent it was trained with (the
seed's article), ``proclab wm sample --agent`` can put another agent in the loop: a fresh
untrained one of the same architecture, or :class:`ScriptedAgent` ("always right").
"""

from __future__ import annotations

import torch
from torch import Tensor

from proclab.envs.actions import ACTION_NAMES
from proclab.models import AgentOutput


class ScriptedAgent(torch.nn.Module):
    """An agent that always presses one button: constant logits, zero value, no state."""

    def __init__(self, action: int, num_actions: int):
        super().__init__()
        self.action, self.num_actions = action, num_actions

    def initial_state(self, batch: int, device=None) -> dict[str, Tensor]:
        return {}

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return {}

    def step(self, obs: Tensor, state, first: Tensor, prev_reward: Tensor | None = None):
        logits = torch.full((obs.shape[0], self.num_actions), -10.0, device=obs.device)
        logits[:, self.action] = 10.0
        return AgentOutput(logits, torch.zeros(obs.shape[0], device=obs.device)), {}


SCRIPTED = {f"always-{name}": i for i, name in enumerate(ACTION_NAMES[:9])}
"""Scripted stand-ins by name: ``always-right``, ``always-up-right``, ... (the 9 direction combos)."""
