"""The agent: IMPALA torso -> memory core -> policy and value heads, with one state dict.

Everything above the network (PPO, IMPALA, evaluation, recording, the world model, the
analyses) talks to an agent through three calls: ``initial_state``, ``step`` (one time step,
acting) and ``unroll`` (``T`` steps, learning). ``unroll`` runs the torso on all ``T*B`` frames
in one batch and only the core's state recurrence loops over time; ``step`` is ``unroll`` with
``T = 1``, so the two agree by construction (and by test).

Hook points (``agent.hook_names()``), in forward order; ``i`` = conv block, ``j`` = residual
block, ``l`` = core layer, ``X`` = a state name (``h``, ``c``, ``F``, ``W_y``, ...):

* ``torso.block<i>.hook_conv``, ``.hook_pool``, ``.res<j>.hook_hidden``, ``.res<j>.hook_out``,
  ``.hook_out``; ``torso.hook_relu`` (last spatial map); ``torso.hook_fc`` (torso output);
* ``hook_features``: the core's input (FC features, plus the clamped previous reward);
* ``core.hook_in`` (after the input projection, transformer-style cores), then per layer
  ``core.<l>.hook_X`` (state leaving each step; per-step), ``core.<l>.hook_read`` /
  ``hook_mem`` / ``ff.hook_hidden`` / ``hook_out`` (as the core has them), and ``core.hook_out``;
* ``heads.hook_logits``, ``heads.hook_value``.

State keys are ``core.<l>.X``; the state leaving a step passes ``core.<l>.hook_X``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import torch
from torch import Tensor

from proclab.envs import EnvConfig
from proclab.models.config import AgentConfig
from proclab.models.cores import build_core
from proclab.models.edited import AgentBase
from proclab.models.heads import PolicyValueHeads
from proclab.models.hooks import HookPoint, hook_points
from proclab.models.torso import build_torso
from proclab.run.runtime import Runtime

STATE_PREFIX = "core."


class AgentOutput(NamedTuple):
    """Policy logits and value: ``(B, A)`` / ``(B,)`` from ``step``, ``(T, B, A)`` / ``(T, B)`` from ``unroll``."""

    logits: Tensor
    value: Tensor


class Agent(AgentBase):
    """IMPALA torso, a memory core chosen by ``config.core``, policy and value heads: an
    :class:`~proclab.models.edited.AgentLike`, with hook points by name, caches and edits
    (:class:`~proclab.models.edited.AgentBase`: ``hook_names``, ``hook_shapes``, ``run_with_cache``,
    ``run_with_hooks``, ``with_interventions``)."""

    def __init__(self, config: AgentConfig) -> None:
        super().__init__()
        self.config = config
        self.env_config: EnvConfig | None = None
        """The environment a loaded agent plays (game, mode, training levels, backgrounds), for the code
        that runs it; ``None`` for an agent built here."""
        self.runtime: Runtime | None = None
        """The runtime a loaded agent was placed with (device, bf16 autocast), so that whoever plays it
        computes as it was loaded to; ``None`` for an agent built here."""
        self.source: str | None = None
        """Where a loaded agent came from: the path or the published name it was loaded from."""
        self.torso = build_torso(config.torso, config.widths, config.fc, config.pool)
        for point in hook_points(self.torso).values():
            point.layout = "flat"  # the torso sees frames flattened over time (T*B, ...)
        self.hook_features = HookPoint()
        self.core = build_core(config, config.fc + int(config.prev_reward))
        self.heads = PolicyValueHeads(self.core.out_dim, config.num_actions)
        if config.torso_init == "xavier":
            self.torso.init_xavier()
        if config.head_init == "orthogonal":
            self.heads.init_orthogonal()

    # -- state ---------------------------------------------------------------------------------
    def initial_state(self, batch: int, device: torch.device | str | None = None) -> dict[str, Tensor]:
        """Zeros, batch-first, float32; ``{}`` for the stateless cores (none, fake_sr, no_carry_sr)."""
        if device is None:
            device = self.heads.policy.weight.device
        return {STATE_PREFIX + k: v for k, v in self.core.initial_state(batch, device).items()}

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        """Per-row shape of each state tensor (add the batch dim in front)."""
        return {STATE_PREFIX + k: s for k, s in self.core.state_shapes().items()}

    # -- layout --------------------------------------------------------------------------------
    def channels_last(self, enabled: bool = True) -> Agent:
        """Store the conv weights channels-last and feed the convs channels-last images (faster)."""
        fmt = torch.channels_last if enabled else torch.contiguous_format
        # torch's overloads of Module.to leave out memory_format, which it takes (and applies to 4-D weights)
        self.torso.to(memory_format=fmt)  # pyright: ignore[reportCallIssue]
        self.torso.channels_last = enabled
        return self

    # -- forward -------------------------------------------------------------------------------
    def step(
        self, obs: Tensor, state: Mapping[str, Tensor], first: Tensor, prev_reward: Tensor | None = None
    ) -> tuple[AgentOutput, dict[str, Tensor]]:
        """One time step. ``obs`` ``(B, 3, 64, 64)`` (uint8, or float in [0, 1]); ``first`` ``(B,)``
        resets those rows' state before ``obs`` is processed; ``prev_reward`` ``(B,)``."""
        out, state = self.unroll(
            obs.unsqueeze(0),
            state,
            first.unsqueeze(0),
            None if prev_reward is None else prev_reward.unsqueeze(0),
        )
        return AgentOutput(out.logits.squeeze(0), out.value.squeeze(0)), state

    def unroll(
        self,
        obs: Tensor,
        state: Mapping[str, Tensor],
        firsts: Tensor,
        prev_rewards: Tensor | None = None,
    ) -> tuple[AgentOutput, dict[str, Tensor]]:
        """``T`` steps, time-major: ``obs`` ``(T, B, 3, 64, 64)``, ``firsts`` ``(T, B)``, ``prev_rewards`` ``(T, B)``.

        uint8 frames are divided by 255; floating frames are used as they are (gradients flow
        back to them, and to the incoming state unless ``detach_every_step``).
        """
        T, B = obs.shape[:2]
        if firsts.shape != (T, B):
            raise ValueError(f"firsts must have shape {(T, B)}, got {tuple(firsts.shape)}")
        core_state = self._core_state(state)
        frames = obs.flatten(0, 1)
        frames = frames.float().div(255) if frames.dtype == torch.uint8 else frames
        features = self.torso(frames).view(T, B, -1)
        if self.config.prev_reward:
            if prev_rewards is None:
                raise ValueError(
                    "this agent reads the previous reward (config.prev_reward): pass prev_rewards"
                )
            r = prev_rewards.reshape(T, B, 1).clamp(-1, 1).to(features.dtype)
            features = torch.cat([features, r], dim=-1)
        features = self.hook_features(features)
        y, core_state = self.core(features, core_state, firsts.bool(), self.config.detach_every_step)
        logits, value = self.heads(y)
        return AgentOutput(logits, value), {STATE_PREFIX + k: v for k, v in core_state.items()}

    forward = unroll

    def _core_state(self, state: Mapping[str, Tensor]) -> dict[str, Tensor]:
        expected = self.state_shapes()
        if set(state) != set(expected):
            raise ValueError(f"state keys {sorted(state)} do not match this agent's {sorted(expected)}")
        return {k.removeprefix(STATE_PREFIX): v for k, v in state.items()}


def build_agent(config: AgentConfig) -> Agent:
    """The agent ``config`` describes, freshly initialised (seed with ``torch.manual_seed``)."""
    return Agent(config)
