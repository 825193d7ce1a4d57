"""Stand-in agents with a fixed policy: "always press one button", or uniformly random.

They speak the :class:`~proclab.models.agent.Agent` API (``step``, ``initial_state``,
``state_shapes``, ``config.prev_reward_reset``), so the actor, the evaluator and the world
model's loop run them like any trained agent: the random agent is the baseline an evaluation
table needs beside a trained one, the scripted ones show that a world model's environment does
not depend on the agent it was trained with.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from proclab.envs.actions import ACTION_NAMES, NUM_ACTIONS
from proclab.models.agent import AgentOutput


@dataclass(frozen=True)
class ScriptedConfig:
    """What the actor reads from an agent's config."""

    num_actions: int = NUM_ACTIONS
    prev_reward_reset: bool = True


class ScriptedAgent(torch.nn.Module):
    """Constant logits, zero value, no state: ``action`` always (its logit +10, the others -10),
    or, with ``action=None``, every action with equal probability (sample its policy, not its mode)."""

    def __init__(self, action: int | None, num_actions: int = NUM_ACTIONS):
        super().__init__()
        self.action, self.num_actions = action, num_actions
        self.config = ScriptedConfig(num_actions)

    @classmethod
    def uniform(cls, num_actions: int = NUM_ACTIONS) -> ScriptedAgent:
        return cls(None, num_actions)

    def initial_state(self, batch: int, device=None) -> dict[str, Tensor]:
        return {}

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return {}

    def step(self, obs: Tensor, state, first: Tensor, prev_reward: Tensor | None = None):
        B = obs.shape[0]
        if self.action is None:
            logits = torch.zeros(B, self.num_actions, device=obs.device)
        else:
            logits = torch.full((B, self.num_actions), -10.0, device=obs.device)
            logits[:, self.action] = 10.0
        return AgentOutput(logits, torch.zeros(B, device=obs.device)), {}


SCRIPTED = {f"always-{name}": i for i, name in enumerate(ACTION_NAMES[:9])}
"""Scripted stand-ins by name: ``always-right``, ``always-up-right``, ... (the 9 direction combos)."""
