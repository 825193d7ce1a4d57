"""A planted agent whose conv channel provably encodes the goal's position, a null agent, and the small
grid world they play (the paired-levels interface of proclab.interpret.interventions.batched_play).

Grid: an 8 x 8 board drawn as a 64 x 64 frame of 8 x 8 pixel cells. Level ``l`` places the agent and
the goal on distinct cells drawn from a generator seeded by ``l``; channel 1 of the frame is 255 on
the goal's cell, channel 2 on the agent's, channel 0 is noise (pseudo-random bytes per level and
step). ``right``/``left``/``up``/``down`` move one cell (row 0 is the top); reaching the goal pays 10
and completes the level; after ``STEPS`` steps the episode is truncated.

The planted agent has one hook point, ``torso.hook_map``, of shape ``(2, 8, 8)``: channel 0 ``goal`` is
the goal layer of the frame (1 on the goal's cell, 0 elsewhere), channel 1 ``noise`` the noise layer.
Its policy walks towards the cell where channel 0 is largest (columns first, then rows), so the
channel encodes the goal's position and writing a larger value on another cell of it sends the
agent there. The null agent has the same hook, both channels noise, and moves at random (by the noise
pixel of the frame, so every variant of a level takes the same walk): no channel tracks anything and
no edit moves it.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

from proclab.envs.actions import ACTION_NAMES
from proclab.models import AgentOutput
from proclab.models.edited import AgentBase
from proclab.models.hooks import HookPoint

SIZE, CELL, STEPS = 8, 8, 30
MOVES = {
    ACTION_NAMES.index(n): d
    for n, d in (("right", (0, 1)), ("left", (0, -1)), ("up", (-1, 0)), ("down", (1, 0)))
}
RIGHT, LEFT, UP, DOWN = (ACTION_NAMES.index(n) for n in ("right", "left", "up", "down"))


class Grid:
    """``slots`` boards; a level's state is ``(agent (row, col), goal (row, col), level)``."""

    def __init__(self, slots: int):
        self.num_envs = slots
        self.agent = np.zeros((slots, 2), np.int64)
        self.goal = np.zeros((slots, 2), np.int64)
        self.level = np.zeros(slots, np.int64)
        self.t = np.zeros(slots, np.int64)

    def level_state(self, level: int):
        cells = np.random.default_rng([level, 21]).choice(SIZE * SIZE, 2, replace=False)
        return np.array(divmod(int(cells[0]), SIZE)), np.array(divmod(int(cells[1]), SIZE)), int(level)

    def load(self, slot: int, state) -> None:
        self.agent[slot], self.goal[slot], self.level[slot] = state
        self.t[slot] = 0

    def observe(self) -> np.ndarray:
        n = self.num_envs
        board = np.zeros((n, 3, SIZE, SIZE), np.uint8)
        for i in range(n):
            board[i, 0] = np.random.default_rng([int(self.level[i]), int(self.t[i]), 22]).integers(
                0, 256, (SIZE, SIZE)
            )
        rows = np.arange(n)
        board[rows, 1, self.goal[:, 0], self.goal[:, 1]] = 255
        board[rows, 2, self.agent[:, 0], self.agent[:, 1]] = 255
        return board.repeat(CELL, 2).repeat(CELL, 3)

    def goal_pixels(self) -> np.ndarray:
        """``(N, 2)`` pixel ``(px, py)`` of each slot's goal centre."""
        return (self.goal[:, ::-1] + 0.5) * CELL

    def step(self, actions):
        d = np.array([MOVES.get(int(a), (0, 0)) for a in actions])
        self.agent = np.clip(self.agent + d, 0, SIZE - 1)
        self.t += 1
        complete = (self.agent == self.goal).all(1)
        truncated = (self.t >= STEPS) & ~complete
        reward = np.where(complete, 10.0, 0.0).astype(np.float32)
        return self.observe(), reward, complete, truncated, {"episode": {"level_complete": complete}}


class _Torso(nn.Module):
    def __init__(self):
        super().__init__()
        self.hook_map = HookPoint(layout="flat")  # sees frames flattened over time, as a torso does


class GoalSeeker(AgentBase):
    """The planted agent (``null=False``) or the null agent of the module docstring (an AgentLike)."""

    def __init__(self, null: bool = False):
        super().__init__()
        self.config = SimpleNamespace(num_actions=len(ACTION_NAMES), prev_reward=False)
        self.torso = _Torso()
        self.null = null

    def initial_state(self, batch: int, device=None) -> dict:
        return {}

    def state_shapes(self) -> dict:
        return {}

    def policy(self, obs: torch.Tensor, goal_map: torch.Tensor) -> torch.Tensor:
        n = len(obs)
        logits = torch.full((n, self.config.num_actions), -100.0)
        if self.null:
            pick = torch.tensor([RIGHT, LEFT, UP, DOWN])[obs[:, 0, 0, 0].long() % 4]
            logits[torch.arange(n), pick] = 1.0
            return logits
        agent = obs[:, 2, ::CELL, ::CELL].flatten(1).float().argmax(1)
        goal = goal_map.flatten(1).argmax(1)
        ar, ac, gr, gc = agent // SIZE, agent % SIZE, goal // SIZE, goal % SIZE
        move = torch.where(gc > ac, RIGHT, torch.where(gc < ac, LEFT, torch.where(gr < ar, UP, DOWN)))
        logits[torch.arange(n), move] = 1.0
        return logits

    def unroll(self, obs, state, firsts, prev_rewards=None):
        T, B = obs.shape[:2]
        frames = obs.flatten(0, 1)
        cells = frames[:, :, ::CELL, ::CELL].float() / 255
        layers = cells[:, [0, 0]] if self.null else cells[:, [1, 0]]
        maps = self.torso.hook_map(layers)
        logits = self.policy(frames, maps[:, 0]).view(T, B, -1)
        return AgentOutput(logits, torch.zeros(T, B)), {}

    def step(self, obs, state, first, prev_reward=None):
        out, state = self.unroll(obs.unsqueeze(0), state, first.unsqueeze(0))
        return AgentOutput(out.logits[0], out.value[0]), state
