"""The parsed agent position, through ``to_pixels``, is where procgen draws the agent.

The agent's pixels are found independently of the camera formula: the same state is rendered
twice by procgen, once as is and once with the agent's ``alpha`` set to 0 (procgen draws it fully
transparent, and nothing else depends on it). The pixels that differ are the agent's sprite. They
must all lie inside the agent's box ``(x +- rx, y +- ry)`` mapped by :func:`to_pixels` (rotated
sprites: inside the circle around the box), and the box must hold a fair share of them.
"""

import dataclasses

import numpy as np
import pytest

from proclab.envs._procgen import ProcgenBackend
from proclab.envs.games import GAMES
from proclab.envs.state import parse_state, serialize_state, to_pixels
from proclab.envs.state.model import agent_index
from proclab.envs.state.sample import random_states

MARGIN = 1.0  # pixels: procgen rounds sprite rectangles to whole pixels


def _render(backend: ProcgenBackend, data: bytes) -> np.ndarray:
    backend.set_slot_state(0, data)
    return backend.observe()[0][0].astype(np.int16)


def _invisible_agent(state):
    entities = list(state.entities)
    i = agent_index(entities)
    entities[i] = dataclasses.replace(entities[i], alpha=0.0)
    return dataclasses.replace(state, entities=entities)


def _agent_box(state) -> tuple[float, float, float, float]:
    """``(left, right, top, bottom)`` pixel bounds of the agent's sprite predicted from the state."""
    agent = state.agent
    rx, ry = (agent.rx, agent.ry) if agent.rotation == 0 else (np.hypot(agent.rx, agent.ry),) * 2
    left, top = to_pixels(state, agent.x - rx, agent.y + ry)
    right, bottom = to_pixels(state, agent.x + rx, agent.y - ry)
    return left - MARGIN, right + MARGIN, top - MARGIN, bottom + MARGIN


# Every game in easy mode, and the memory mode of the games whose camera follows the agent only there.
CASES = [(game, "easy") for game in GAMES] + [
    (game, "memory") for game in ("dodgeball", "heist", "maze", "miner")
]


@pytest.mark.parametrize(("game", "mode"), CASES)
def test_agent_pixels_are_where_to_pixels_puts_the_agent(game, mode):
    backend = ProcgenBackend(1, game, distribution_mode=mode, num_levels=0, start_level=0, rand_seed=0)
    seen = 0
    try:
        for data in random_states(game, mode, count=12, seed=1 + GAMES.index(game)):
            state = parse_state(data)
            changed = np.any(
                _render(backend, data) != _render(backend, serialize_state(_invisible_agent(state))), -1
            )
            rows, cols = np.nonzero(changed)
            if len(rows) == 0:  # the agent is hidden (behind another sprite, or outside the frame)
                continue
            seen += 1
            left, right, top, bottom = _agent_box(state)
            assert cols.min() >= left and cols.max() + 1 <= right, (
                f"{game}: columns {cols.min()}..{cols.max()}"
            )
            assert rows.min() >= top and rows.max() + 1 <= bottom, f"{game}: rows {rows.min()}..{rows.max()}"
            px, py = to_pixels(state, state.agent.x, state.agent.y)
            assert abs((cols.min() + cols.max() + 1) / 2 - px) <= (right - left) / 2
            assert abs((rows.min() + rows.max() + 1) / 2 - py) <= (bottom - top) / 2
    finally:
        backend.close()
    assert seen >= 8, f"{game}: the agent was visible in only {seen} of 12 frames"
