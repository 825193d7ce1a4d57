"""Stand-in agents with a fixed policy: "always press one button", or uniformly random.

They answer as every agent does (:class:`~proclab.models.edited.AgentLike`: ``step``, ``unroll``, ``initial_state``,
``state_shapes``, ``config.prev_reward_reset``), so the actor, the evaluator and the world
model's loop run them like any trained agent: the random agent is the baseline an evaluation
table needs beside a trained one, the scripted ones show that a world model's environment does
not depend on the agent it was trained with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from proclab.envs.actions import ACTION_NAMES, NUM_ACTIONS
from proclab.models.agent import AgentOutput
from proclab.models.edited import AgentBase
from proclab.models.hooks import HookPoint


@dataclass(frozen=True)
class ScriptedConfig:
    """What the actor reads from an agent's config."""

    num_actions: int = NUM_ACTIONS
    prev_reward_reset: bool = True


class ScriptedHeads(nn.Module):
    """Where a trained agent's heads have their hook points (``heads.hook_logits``, ``heads.hook_value``)."""

    def __init__(self) -> None:
        super().__init__()
        self.hook_logits = HookPoint()
        self.hook_value = HookPoint()


class ScriptedAgent(AgentBase):
    """Constant logits, zero value, no state: ``action`` always (its logit +10, the others -10),
    or, with ``action=None``, every action with equal probability (sample its policy, not its mode).

    An :class:`~proclab.models.edited.AgentLike` like a trained agent: ``step`` and ``unroll``, and the two
    hook points of the heads (``heads.hook_logits``, ``heads.hook_value``), so caches, edits and hook
    functions work on it as on any agent."""

    def __init__(self, action: int | None, num_actions: int = NUM_ACTIONS):
        super().__init__()
        self.action, self.num_actions = action, num_actions
        self.config = ScriptedConfig(num_actions)
        self.heads = ScriptedHeads()

    @classmethod
    def uniform(cls, num_actions: int = NUM_ACTIONS) -> ScriptedAgent:
        return cls(None, num_actions)

    def initial_state(self, batch: int, device: torch.device | str | None = None) -> dict[str, Tensor]:
        return {}

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return {}

    def unroll(
        self, obs: Tensor, state: Mapping[str, Tensor], firsts: Tensor, prev_rewards: Tensor | None = None
    ) -> tuple[AgentOutput, dict[str, Tensor]]:
        T, B = obs.shape[:2]
        if self.action is None:
            logits = torch.zeros(T, B, self.num_actions, device=obs.device)
        else:
            logits = torch.full((T, B, self.num_actions), -10.0, device=obs.device)
            logits[..., self.action] = 10.0
        value = torch.zeros(T, B, device=obs.device)
        return AgentOutput(self.heads.hook_logits(logits), self.heads.hook_value(value)), {}

    def step(
        self, obs: Tensor, state: Mapping[str, Tensor], first: Tensor, prev_reward: Tensor | None = None
    ) -> tuple[AgentOutput, dict[str, Tensor]]:
        out, _ = self.unroll(obs.unsqueeze(0), state, first.unsqueeze(0))
        return AgentOutput(out.logits.squeeze(0), out.value.squeeze(0)), {}

    forward = unroll


SCRIPTED = {f"always-{name}": i for i, name in enumerate(ACTION_NAMES[:9])}
"""Scripted stand-ins by name: ``always-right``, ``always-up-right``, ... (the 9 direction combos)."""
