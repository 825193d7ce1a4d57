"""World coordinates to the pixels of the agent's observation, as procgen's renderer places them.

procgen draws a square window of ``visibility`` world units onto the frame
(``BasicAbstractGame::prepare_for_drawing``): centred on the agent when ``center_agent`` is on
(climber and fruitbot centre horizontally on the level and look ahead of the agent), else on the
middle of the level. World y points up, pixel y down. The centre is recomputed from the state
(not read from the stored ``center_x``/``center_y``, which are those of the last frame drawn), so
the mapping also holds for an edited state before procgen has drawn it.
"""

from __future__ import annotations

import numpy as np

from proclab.envs.state.model import GameState

# Games whose choose_center() looks ahead of the agent: the agent's y offset in agent heights (ry).
_LOOK_AHEAD = {"climber": 5.0, "fruitbot": 2.0}


def camera(state: GameState) -> tuple[float, float, float]:
    """``(center_x, center_y, visibility)`` of the frame procgen draws for ``state``, in world units."""
    basic = state.basic
    width, height = basic.main_width, basic.main_height
    if not state.header.center_agent:
        return width / 2, height / 2, max(float(max(width, height)), basic.min_visibility)
    agent = state.agent
    if state.game in _LOOK_AHEAD:
        return width / 2, agent.y + width / 2 - _LOOK_AHEAD[state.game] * agent.ry, float(width)
    return agent.x, agent.y, basic.visibility


def to_pixels(state: GameState, x, y, size: int = 64):
    """Pixel coordinates ``(px, py)`` (column, row; float) in a ``size`` x ``size`` frame of world ``(x, y)``.

    ``x``/``y`` may be numbers or arrays. Pixel ``(0, 0)`` is the top-left corner of the top-left
    pixel, so the pixel holding a point is ``(floor(px), floor(py))``.
    """
    center_x, center_y, visibility = camera(state)
    unit = size / visibility
    px = (np.asarray(x, dtype=np.float64) - center_x + visibility / 2) * unit
    py = (center_y + visibility / 2 - np.asarray(y, dtype=np.float64)) * unit
    if np.ndim(px) == 0:
        return float(px), float(py)
    return px, py
