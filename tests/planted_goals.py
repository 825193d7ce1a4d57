"""Planted CoinRun agents whose goals move in a known way under an edit, for the goal columns of the sweep and
of steering: a test that the columns move as planted fails an implementation that reads the goals of the wrong
episodes, arms or levels, which a policy that ignores every edit (0 lost, 0 gained everywhere) cannot.

:class:`GoRunner` runs to the right whenever its ``go`` unit says so; holding that unit at zero stops it where
it starts, so it reaches no goal at all. :class:`CoinSighted` runs only while it sees the coin; subtracting the
coin's steering vector hides the coin from it, so it stands still.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

from proclab.envs import EnvConfig
from proclab.envs.actions import ACTION_NAMES
from proclab.models import AgentOutput
from proclab.models.edited import AgentBase
from proclab.models.hooks import HookPoint

NOOP, UP_RIGHT = ACTION_NAMES.index("no-op"), ACTION_NAMES.index("up-right")
KEY = "core.0.h"
COINRUN = EnvConfig(game=("coinrun",), mode="easy", split="train")


class _Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.hook_h = HookPoint(layout="step")


class _Planted(AgentBase):
    """What both planted agents share: no-op or up-right by a yes/no per row, a zero value, the CoinRun env."""

    def __init__(self):
        super().__init__()
        self.config = SimpleNamespace(
            num_actions=len(ACTION_NAMES), prev_reward=False, prev_reward_reset=True
        )
        self.env_config = COINRUN

    @staticmethod
    def run_if(go: torch.Tensor) -> torch.Tensor:
        logits = torch.full((len(go), len(ACTION_NAMES)), -30.0)
        logits[:, NOOP] = 0.0
        logits[:, UP_RIGHT] = torch.where(go, 30.0, -30.0)
        return logits

    def step(self, obs, state, first, prev_reward=None):
        out, state = self.unroll(obs.unsqueeze(0), state, first.unsqueeze(0))
        return AgentOutput(out.logits[0], out.value[0]), state


class GoRunner(_Planted):
    """A two-unit state ``core.0.h`` (one per-step hook point, ``core.0.hook_h``): unit 0 ``go`` = 0.9 + 0.1 u and
    unit 1 ``noise`` = u, with u the frame's top-left red byte / 255, so ``go`` never falls below 0.9 in play.
    It presses up-right (runs and jumps, blind to everything else) while ``go`` is above 0.5, nothing
    otherwise. Holding ``go`` at the start state's 0 (the sweep's collapse arm) stops it on its start cell,
    which on a level with the coin moved is three cells or more from the coin: every coin and every end the
    plain agent reached is lost, none gained. ``noise`` is read by nothing."""

    def __init__(self):
        super().__init__()
        self.core = nn.ModuleList([_Layer()])

    def initial_state(self, batch: int, device=None) -> dict[str, torch.Tensor]:
        return {KEY: torch.zeros(batch, 2, device=device)}

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return {KEY: (2,)}

    def unroll(self, obs, state, firsts, prev_rewards=None):
        logits, h = [], state[KEY]
        for t in range(obs.shape[0]):
            u = obs[t, :, 0, 0, 0].float() / 255
            h = self.core[0].hook_h(torch.stack([0.9 + 0.1 * u, u], 1))
            logits.append(self.run_if(h[:, 0] > 0.5))
        return AgentOutput(torch.stack(logits), torch.zeros(obs.shape[:2])), {KEY: h}


def coin_mask(frames: torch.Tensor) -> torch.Tensor:
    """``(N, 1, 64, 64)``: 1 where a frame's pixel has the coin's gold (red and green high, blue low)."""
    rgb = frames.float()
    return ((rgb[:, 0] > 200) & (rgb[:, 1] > 150) & (rgb[:, 2] < 100)).float().unsqueeze(1)


class CoinSighted(_Planted):
    """One hook point, ``torso.hook_coin`` ``(1, 64, 64)``: the frame's :func:`coin_mask`. It presses up-right
    while the mask holds more than :data:`SEEN` pixels (it sees the coin), nothing otherwise. Steering's
    per-level coin vector is the mask of the level's first frame with the coin minus without it: the coin's
    pixels there. Subtracted at every step it takes one coin's worth of pixels off the sum wherever the coin
    is drawn, so the agent sees none and stands still: every coin it took is lost, none gained."""

    SEEN = 2

    def __init__(self):
        super().__init__()
        self.torso = nn.Module()
        self.torso.hook_coin = HookPoint(layout="flat")

    def initial_state(self, batch: int, device=None) -> dict[str, torch.Tensor]:
        return {}

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return {}

    def unroll(self, obs, state, firsts, prev_rewards=None):
        T, B = obs.shape[:2]
        seen = self.torso.hook_coin(coin_mask(obs.reshape(T * B, *obs.shape[2:])))
        logits = self.run_if(seen.sum((1, 2, 3)) > self.SEEN)
        return AgentOutput(logits.reshape(T, B, -1), torch.zeros(T, B)), {}


def runs(agent, levels) -> np.ndarray:
    """Whether ``agent`` pressed up-right on its first step of each of ``levels`` (Level objects)."""
    frames = torch.from_numpy(np.stack([lv.frames()[0].transpose(2, 0, 1) for lv in levels]))
    out, _ = agent.step(frames, agent.initial_state(len(levels)), torch.ones(len(levels), dtype=torch.bool))
    return (out.logits.argmax(1) == UP_RIGHT).numpy()
