"""A level as a picture: what procgen draws for it, and a map of the whole level, every entity labelled.

Left: procgen's own 512x512 rendering of the state (the agent's view at 8x), with each entity inside
the view marked where :func:`proclab.envs.state.to_pixels` places it, so a reader can check the
parsed positions against the pixels. Right: the whole level as data: grid cells coloured by kind
(world y up, as procgen stores it), entities as labelled markers, the goal's cells starred. An
entity outside the agent's view appears only on the map.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from proclab.envs.state import GameState, glossary, to_pixels
from proclab.envs.state.glossary import SPACE
from proclab.io.files import save_figure, subplots

if TYPE_CHECKING:
    from proclab.io.drawing import Figure

HUMAN = 512


def _world_entities(state: GameState):
    """Entities placed in the world (not screen-fixed overlays such as heist's key ring)."""
    return [e for e in state.entities if not e.use_abs_coords]


def _draw_view(ax, state: GameState, human: np.ndarray) -> None:
    ax.imshow(human)
    for e in _world_entities(state):
        px, py = to_pixels(state, e.x, e.y, size=HUMAN)
        if 0 <= px < HUMAN and 0 <= py < HUMAN:
            ax.plot(px, py, "+", color="white" if e.kind != "agent" else "yellow", ms=10, mew=2)
            ax.annotate(e.kind, (px, py), xytext=(4, -4), textcoords="offset points", color="white",
                        fontsize=7, bbox={"facecolor": "black", "alpha": 0.5, "pad": 1, "lw": 0})  # fmt: skip
    ax.set_title("procgen's view (agent's frame x8), entities marked", fontsize=9)
    ax.set_axis_off()


def _draw_map(ax, state: GameState) -> None:
    import matplotlib  # lazy: slow to import; loaded already by the figure being drawn

    names = glossary(state.game)
    values = [v for v in np.unique(state.grid) if v != SPACE]
    codes = np.zeros(state.grid.shape, np.int64)
    for i, v in enumerate(values, start=1):
        codes[state.grid == v] = i
    colours = matplotlib.colormaps["tab20"](np.linspace(0, 1, 20))
    palette = np.vstack([[1, 1, 1, 1], colours[np.arange(len(values)) % 20]])
    height, width = state.grid.shape
    ax.imshow(palette[codes], origin="lower", extent=(0, width, 0, height), interpolation="nearest")
    width, height = (
        min(width, state.basic.main_width),
        min(height, state.basic.main_height),
    )  # the level's part
    for i, v in enumerate(values, start=1):
        ax.plot([], [], "s", color=palette[i], label=names.cells.get(int(v), f"cell{v}"))
    if names.goal is not None and names.is_cell(names.goal):
        rows, cols = np.nonzero(state.grid == names.type_of(names.goal))
        ax.plot(cols + 0.5, rows + 0.5, "*", color="gold", mec="black", ms=14, label=f"{names.goal} (goal)")
    for e in _world_entities(state):
        agent = e.kind == "agent"
        ax.plot(e.x, e.y, "o" if agent else "x", color="red" if agent else "black", ms=8 if agent else 6)
        ax.annotate(e.kind, (e.x, e.y), xytext=(3, 3), textcoords="offset points", fontsize=7)
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_title(f"the whole level: {width}x{height} cells, {len(state.entities)} entities", fontsize=9)
    ax.set_aspect("equal")
    if ax.get_legend_handles_labels()[0]:  # a level without cells (BigFish) has nothing to list
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def level_figure(state: GameState, human: np.ndarray, title: str) -> Figure:
    """The two panels of the module docstring as a matplotlib figure."""
    fig, (view, level) = subplots(1, 2, figsize=(13, 6.2))
    _draw_view(view, state, human)
    _draw_map(level, state)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def save_level_picture(path: str | Path, state: GameState, human: np.ndarray, title: str) -> Path:
    """The two panels of the module docstring as a PNG at ``path`` (written atomically)."""
    return save_figure(level_figure(state, human, title), path, dpi=100)
