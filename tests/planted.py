"""A planted agent whose hidden directions have known effects, a null agent, and the small deterministic
env they play (the paired-levels interface of proclab.interpret.interventions.batched_play).

Corridor: level ``l`` has a goal ``4 + l % 5`` steps to the right. ``right`` moves one step
right, ``left`` one step left, every other action stays. Reaching the goal pays 10 and ends the
episode (level completed); after ``STEPS`` steps it is truncated. Every frame carries two cues,
pseudo-random bytes drawn per (level, step) from a generator seeded by the level: ``u`` in pixel
(0, 0) of channel 0 and ``v`` in channel 1; channel 2 shows the position. Frames are 8 x 8 (the
agent reads three pixels; Procgen's 64 x 64 would only make the tests slower).

The planted agent's state ``core.0.h`` has five units, and the test basis makes each unit one
coordinate (IC m = unit m):

* 0 ``gate``: ``1 + 0.1 (u - 0.5)``, always near 1. The agent moves right only while it is above
  0.5, so no value seen in the data stops it; holding it at the start state's 0 (collapse) does.
* 1 ``drive``: ``u``. The agent moves right when it is above 0.3 (about 70 % of steps) and idles
  otherwise; holding it at its mean or 95th percentile makes it always move, at its 5th percentile
  or at 0 never.
* 2 ``position``: the position / 10, read by nothing (a null direction).
* 3 ``style``: ``v``. When idle the agent presses ``up`` if it is above 0.7, else ``down``: it
  changes which actions are pressed, never where the agent goes.
* 4 ``echo``: ``(echo_{t-1} + u) / 2``, recurrent, read by nothing (a null direction).

A third cue ``w`` (pixel (0, 1) of channel 0, its own generator) is read only by :class:`AtlasAgent`,
the planted agent of the atlas tests: four more units carry it down a delay line, 5 ``cue`` = ``w_t``,
6 ``delay1`` = ``w_{t-1}``, 7 ``delay2`` = ``w_{t-2}``, 8 ``jump`` = ``w_{t-3}``, and the agent jumps
(``up-right``, which moves right as ``right`` does) whenever ``jump`` is above 0.8. So the cue unit's
top moments are the frames with the brightest cue pixel, it leads the jump action by 3 steps (delay1
by 2, delay2 by 1, jump by 0), and holding it at its mean (0.5) stops every jump. Its value head is
the cue unit itself (the planted policy reads signs, whose gradients are zero).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

from proclab.envs.actions import ACTION_NAMES
from proclab.interpret.bases.coordinates import LinearCoordinates
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.interventions.arms import Recorded
from proclab.models import AgentOutput
from proclab.models.edited import AgentBase
from proclab.models.hooks import HookPoint
from proclab.store import ShardWriter
from proclab.store.schema import STATE_LAYOUT_ATTR

STEPS = 24
RIGHT, LEFT = ACTION_NAMES.index("right"), ACTION_NAMES.index("left")
UP, DOWN = ACTION_NAMES.index("up"), ACTION_NAMES.index("down")
UP_RIGHT = ACTION_NAMES.index("up-right")
RIGHTWARD = [ACTION_NAMES.index(n) for n in ("right", "up-right", "down-right")]
UNITS = ("gate", "drive", "position", "style", "echo")
ATLAS_UNITS = (*UNITS, "cue", "delay1", "delay2", "jump")
KEY = "core.0.h"


class Corridor:
    """``slots`` corridors (see the module docstring); a level's state is its seed."""

    def __init__(self, slots: int):
        self.num_envs = slots
        self.level = np.zeros(slots, np.int64)
        self.t = np.zeros(slots, np.int64)
        self.pos = np.zeros(slots, np.int64)
        self.cues = np.zeros((slots, STEPS, 3), np.uint8)

    def level_state(self, level: int) -> tuple[int, np.ndarray]:
        """The level and its cues: one pseudo-random byte per step and cue (``w`` from its own generator)."""
        uv = np.random.default_rng([level, 11]).integers(0, 256, (STEPS, 2), dtype=np.uint8)
        w = np.random.default_rng([level, 12]).integers(0, 256, (STEPS, 1), dtype=np.uint8)
        return int(level), np.concatenate([uv, w], 1)

    def load(self, slot: int, state: tuple[int, np.ndarray]) -> None:
        self.level[slot], self.cues[slot] = state
        self.t[slot], self.pos[slot] = 0, 0

    def observe(self) -> np.ndarray:
        obs = np.zeros((self.num_envs, 3, 8, 8), np.uint8)
        cues = self.cues[np.arange(self.num_envs), self.t]
        obs[:, 0, 0, 0], obs[:, 1, 0, 0], obs[:, 0, 0, 1] = cues[:, 0], cues[:, 1], cues[:, 2]
        obs[:, 2, 0, 0] = self.pos * 20
        return obs

    def step(self, actions):
        actions = np.asarray(actions)
        self.pos = np.maximum(0, self.pos + np.isin(actions, RIGHTWARD) - (actions == LEFT))
        self.t += 1
        complete = self.pos >= 4 + self.level % 5
        truncated = (self.t >= STEPS) & ~complete
        done = complete | truncated
        self.t[done], self.pos[done] = 0, 0
        reward = np.where(complete, 10.0, 0.0).astype(np.float32)
        return self.observe(), reward, complete, truncated, {"episode": {"level_complete": complete}}


class _Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.hook_h = HookPoint(layout="step")


class PlantedAgent(AgentBase):
    """The planted agent of the module docstring (an AgentLike, one per-step hook point ``core.0.hook_h``).

    ``null=True`` gives the null agent: the same state, but actions drawn at random from its own
    generator (right 45 %, left 15 %, up and down 20 % each: it completes about half of the levels),
    reading no unit, so no edit can change its behaviour while its episodes still vary.
    """

    def __init__(self, null: bool = False, seed: int = 0):
        super().__init__()
        self.config = SimpleNamespace(
            num_actions=len(ACTION_NAMES), prev_reward=False, prev_reward_reset=True
        )
        self.core = nn.ModuleList([_Layer()])
        self.null = null
        self.generator = torch.Generator().manual_seed(seed)

    def initial_state(self, batch: int, device=None) -> dict[str, torch.Tensor]:
        return {KEY: torch.zeros(batch, len(UNITS), device=device)}

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return {KEY: (len(UNITS),)}

    def units(self, obs: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        u = obs[:, 0, 0, 0].float() / 255
        v = obs[:, 1, 0, 0].float() / 255
        pos = obs[:, 2, 0, 0].float() / 20
        return torch.stack([1 + 0.1 * (u - 0.5), u, pos / 10, v, 0.5 * prev[:, 4] + 0.5 * u], 1)

    def policy(self, h: torch.Tensor) -> torch.Tensor:
        logits = torch.full((len(h), self.config.num_actions), -100.0)
        if self.null:
            pick = torch.tensor([LEFT, RIGHT, UP, DOWN])[
                torch.randint(0, 4, (len(h),), generator=self.generator)
            ]
            logits[torch.arange(len(h)), pick] = 1.0
            return logits
        go = torch.minimum(h[:, 0] - 0.5, h[:, 1] - 0.3)
        logits[:, RIGHT] = 10 * torch.sign(go)
        logits[:, UP] = 5 * (h[:, 3] - 0.7)
        logits[:, DOWN] = -5 * (h[:, 3] - 0.7)
        return logits

    def value(self, h: torch.Tensor) -> torch.Tensor:
        return torch.zeros(len(h))

    def unroll(self, obs, state, firsts, prev_rewards=None):
        h = state[KEY]
        logits, values = [], []
        for t in range(obs.shape[0]):
            h = h * (~firsts[t].bool()).float()[:, None]
            h = self.core[0].hook_h(self.units(obs[t], h))
            logits.append(self.policy(h))
            values.append(self.value(h))
        return AgentOutput(torch.stack(logits), torch.stack(values)), {KEY: h}

    def step(self, obs, state, first, prev_reward=None):
        out, state = self.unroll(obs.unsqueeze(0), state, first.unsqueeze(0))
        return AgentOutput(out.logits[0], out.value[0]), state


class AtlasAgent(PlantedAgent):
    """The planted agent with the cue's delay line and jumps (see the module docstring); frames may be
    uint8 or, as saliency feeds them, floats in [0, 1]."""

    def initial_state(self, batch: int, device=None) -> dict[str, torch.Tensor]:
        return {KEY: torch.zeros(batch, len(ATLAS_UNITS), device=device)}

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return {KEY: (len(ATLAS_UNITS),)}

    def units(self, obs: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        pix = obs.float() / 255 if obs.dtype == torch.uint8 else obs
        u, v, w, pos = pix[:, 0, 0, 0], pix[:, 1, 0, 0], pix[:, 0, 0, 1], pix[:, 2, 0, 0] * 255 / 20
        base = [1 + 0.1 * (u - 0.5), u, pos / 10, v, 0.5 * prev[:, 4] + 0.5 * u]
        return torch.stack([*base, w, prev[:, 5], prev[:, 6], prev[:, 7]], 1)

    def policy(self, h: torch.Tensor) -> torch.Tensor:
        logits = super().policy(h)
        logits[:, UP_RIGHT] = 40 * torch.sign(h[:, 8] - 0.8)
        return logits

    def value(self, h: torch.Tensor) -> torch.Tensor:
        return h[:, 5]


def unit_basis(d: int = len(UNITS)) -> Basis:
    """A basis whose IC m (and PC m) is unit m of a ``d``-unit planted state, exactly."""
    return Basis(
        mean=np.zeros(d),
        std=np.ones(d),
        pca_mean=np.zeros(d),
        components=np.eye(d),
        pc_var=np.ones(d),
        unmixing=np.eye(d),
        config=BasisConfig(n_ics=d),
        provenance={"activation": "state_out/core.0.h"},
        fit_info={},
    )


def recorded_states(levels=range(1000, 1040)) -> np.ndarray:
    """The planted agent's states over one episode of each of ``levels`` (its recording)."""
    agent, env = PlantedAgent(), Corridor(len(levels))
    for slot, level in enumerate(levels):
        env.load(slot, env.level_state(level))
    state, first, rows = agent.initial_state(len(levels)), torch.ones(len(levels), dtype=torch.bool), []
    live = np.ones(len(levels), bool)
    with torch.no_grad():
        while live.any():
            out, state = agent.step(torch.from_numpy(env.observe()), state, first)
            rows.append(state[KEY][torch.from_numpy(live)].numpy())
            _, _, terminated, truncated, _ = env.step(out.logits.argmax(1).numpy())
            live &= ~(terminated | truncated)
            first = torch.zeros_like(first)
    return np.concatenate(rows)


def planted_recorded() -> tuple[LinearCoordinates, Recorded]:
    """The unit basis's coordinates and their recorded distribution (the recorded states' coordinates)."""
    coords = LinearCoordinates(unit_basis(), "ica")
    states = torch.from_numpy(recorded_states()).double()
    return coords, Recorded(coords.encode(states).numpy(), np.zeros(len(UNITS)))


def record_store(path, agent, levels) -> np.ndarray:
    """One greedy episode of ``agent`` on each of ``levels`` (played side by side) written as an episode
    store with the fields the recorder writes; returns the states in store order."""
    levels = list(levels)
    width = agent.state_shapes()[KEY][0]
    env = Corridor(len(levels))
    for slot, level in enumerate(levels):
        env.load(slot, env.level_state(level))
    state, first = agent.initial_state(len(levels)), torch.ones(len(levels), dtype=torch.bool)
    live, steps = np.ones(len(levels), bool), []
    complete = np.zeros(len(levels), bool)
    while live.any():
        obs = env.observe()
        with torch.no_grad():
            out, state = agent.step(torch.from_numpy(obs), state, first)
        action = out.logits.argmax(1).numpy()
        _, reward, terminated, truncated, _ = env.step(action)
        steps.append(
            (
                live.copy(),
                obs,
                action,
                out.logits.numpy(),
                out.value.numpy(),
                reward,
                terminated,
                truncated,
                state[KEY].numpy().copy(),
            )
        )
        complete |= live & terminated
        live &= ~(terminated | truncated)
        first = torch.zeros_like(first)
    rows = []
    with ShardWriter(path, attrs={STATE_LAYOUT_ATTR: {"core.0": [[KEY, [width]]]}}, commit_seconds=3600) as w:
        for slot, level in enumerate(levels):
            mine = [s for s in steps if s[0][slot]]
            obs, action, logits, value, reward, term, trunc, h = (
                np.stack([s[i][slot] for s in mine]) for i in range(1, 9)
            )
            T = len(mine)
            w.append(
                {
                    "obs": obs,
                    "action": action.astype(np.int64),
                    "logits": logits.astype(np.float32),
                    "logits_clean": logits.astype(np.float32),
                    "value": value.astype(np.float32),
                    "reward": reward.astype(np.float32),
                    "terminated": term.astype(bool),
                    "truncated": trunc.astype(bool),
                    "step": np.arange(T, dtype=np.int32),
                    "level_seed": np.full(T, level, np.int64),
                    "state_out/core.0": h.astype(np.float32),
                },
                {
                    "level_seed": int(level),
                    "game": "corridor",
                    "return": float(reward.sum()),
                    "level_complete": bool(complete[slot]),
                    "state_in0/core.0": np.zeros(width, np.float32),
                },
            )
            rows.append(h)
    return np.concatenate(rows)
