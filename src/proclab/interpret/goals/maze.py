"""A procgen maze as a graph: its open cells, the unique path between two cells, the decision square and the
distances Mini et al. (2023) regressed the agent's choice on.

Procgen's maze generator carves a perfect maze (Kruskal's algorithm over the odd cells of a ``maze_dim``-wide
square centred in the ``world_dim`` world; everything else is wall), so the open cells form a tree and the path
between two cells is unique: one breadth-first search from a cell gives every path from it. Cells are
``(x, y)`` = ``(column, row)`` of :attr:`GameState.grid`, row 0 at the bottom, so the maze's top-right corner
is the largest ``x`` and ``y`` of its square and the agent starts at the smallest.

The *decision square* (Mini et al.) is where the path from the start to the cheese and the path from the start
to the top-right corner part: the last cell the two share. A maze has none when one target lies on the way
to the other (the agent then meets no choice between them). The *top-right region* is the top-right
``region x region`` square of the maze (5 x 5 in their study, the cheese's training distribution);
distances to it are to its nearest open cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from proclab.envs.state import GameState, glossary, maze_square
from proclab.errors import ProclabError
from proclab.models.planners import Cell, tree_towards

PUBLISHED_WORLD = 25
"""The world width in which Mini et al. measured ``cheese_coord_norm`` (procgen's hard-mode maze world)."""
FEATURES = (
    "steps_between_cheese_5x5",
    "euc_dist_cheese_5x5",
    "steps_between_decision_square_5x5",
    "euc_dist_decision_square_5x5",
    "steps_between_cheese_top_right",
    "euc_dist_cheese_top_right",
    "steps_between_decision_square_top_right",
    "euc_dist_decision_square_top_right",
    "steps_between_cheese_decision_square",
    "euc_dist_cheese_decision_square",
    "cheese_coord_norm",
)
"""Mini et al.'s maze properties, under their names (Euclidean distances between cell centres, steps along
the maze's unique path; ``5x5`` is the top-right region; ``cheese_coord_norm`` the length of the cheese's
(row, column) in a 25-wide world with the maze centred, as their padded grid placed it)."""


def euclid(a: Cell, b: Cell) -> float:
    return math.hypot(a[0] - b[0], a[1] - b[1])


@dataclass(frozen=True)
class Maze:
    """One maze's open cells and the cells that matter to the cheese-or-corner choice."""

    open_cells: frozenset[Cell]
    low: int
    """The maze square's first column and row (its bottom-left cell is ``(low, low)``)."""
    size: int
    """The maze square's width (procgen's ``maze_dim``)."""
    start: Cell
    cheese: Cell
    region: int = 5
    _parents: dict = field(default_factory=dict, repr=False, compare=False)  # breadth-first trees by root

    @property
    def corner(self) -> Cell:
        top = self.low + self.size - 1
        return (top, top)

    def in_region(self, cell: Cell) -> bool:
        """Whether ``cell`` lies in the top-right ``region x region`` square of the maze."""
        edge = self.low + self.size - self.region
        return cell[0] >= edge and cell[1] >= edge

    def neighbours(self, cell: Cell) -> list[Cell]:
        x, y = cell
        return [c for c in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)) if c in self.open_cells]

    def _tree_from(self, root: Cell) -> dict[Cell, Cell | None]:
        """Breadth-first parents of every open cell towards ``root`` (cached per root)."""
        if root not in self._parents:
            self._parents[root] = tree_towards(root, self.neighbours)
        return self._parents[root]

    def path(self, a: Cell, b: Cell) -> list[Cell]:
        """The cells from ``a`` to ``b`` (both included) along the maze."""
        parents = self._tree_from(b)
        if a not in parents:
            raise ProclabError(f"cell {b} cannot be reached from {a} in this maze")
        out = [a]
        while out[-1] != b:
            out.append(parents[out[-1]])
        return out

    def steps(self, a: Cell, b: Cell) -> int:
        return self._depths(a)[b]

    def _depths(self, root: Cell) -> dict[Cell, int]:
        """Steps from ``root`` to every open cell, from its breadth-first parents (cached per root)."""
        key = ("depths", root)
        if key not in self._parents:
            parents, depths = self._tree_from(root), {root: 0}
            for cell in parents:  # breadth-first order: a parent comes before its children
                if parents[cell] is not None:
                    depths[cell] = depths[parents[cell]] + 1
            self._parents[key] = depths
        return self._parents[key]

    def steps_to_region(self, a: Cell) -> int:
        """Steps from ``a`` to the nearest open cell of the top-right region."""
        depths = self._depths(a)
        return min(depths[c] for c in self.open_cells if self.in_region(c))

    def euclid_to_region(self, a: Cell) -> float:
        """Euclidean distance from ``a`` to the nearest open cell of the top-right region."""
        return min(euclid(a, c) for c in self.open_cells if self.in_region(c))

    @property
    def decision_square(self) -> Cell | None:
        """The last cell shared by the paths from the start to the cheese and to the corner; None when one of
        the two lies on the path to the other."""
        to_cheese = self.path(self.start, self.cheese)
        to_corner = self.path(self.start, self.corner)
        if self.cheese in to_corner or self.corner in to_cheese:
            return None
        shared = 0
        while to_cheese[shared + 1] == to_corner[shared + 1]:
            shared += 1
        return to_cheese[shared]

    def branches(self) -> tuple[Cell, Cell] | None:
        """The cells one step past the decision square towards the cheese and towards the corner."""
        square = self.decision_square
        if square is None:
            return None
        return self.path(square, self.cheese)[1], self.path(square, self.corner)[1]

    def features(self) -> dict[str, float]:
        """Mini et al.'s properties (:data:`FEATURES`) of a maze with a decision square."""
        d, c, tr = self.decision_square, self.cheese, self.corner
        if d is None:
            raise ProclabError("this maze has no decision square: one target lies on the path to the other")
        shift = (PUBLISHED_WORLD - self.size) // 2 - self.low
        return {
            "steps_between_cheese_5x5": self.steps_to_region(c),
            "euc_dist_cheese_5x5": self.euclid_to_region(c),
            "steps_between_decision_square_5x5": self.steps_to_region(d),
            "euc_dist_decision_square_5x5": self.euclid_to_region(d),
            "steps_between_cheese_top_right": self.steps(c, tr),
            "euc_dist_cheese_top_right": euclid(c, tr),
            "steps_between_decision_square_top_right": self.steps(d, tr),
            "euc_dist_decision_square_top_right": euclid(d, tr),
            "steps_between_cheese_decision_square": self.steps(c, d),
            "euc_dist_cheese_decision_square": euclid(c, d),
            "cheese_coord_norm": math.hypot(c[1] + shift, c[0] + shift),
        }


def maze_of(state: GameState, region: int = 5) -> Maze:
    """The maze of a parsed maze state (its first frame: the agent on its start cell)."""
    if state.game != "maze":
        raise ProclabError(f"a maze analysis reads maze states, not {state.game}")
    names = glossary("maze")
    wall, cheese_type = names.type_of("wall"), names.type_of("cheese")
    low, size = maze_square(state)
    square = state.grid[low : low + size, low : low + size]
    rows, cols = np.nonzero(square != wall)
    cells = frozenset((int(c) + low, int(r) + low) for r, c in zip(rows, cols, strict=True))
    cheeses = np.argwhere(square == cheese_type)
    if len(cheeses) != 1:
        raise ProclabError(f"a maze with {len(cheeses)} cheeses: the analysis needs exactly one")
    cheese = (int(cheeses[0][1]) + low, int(cheeses[0][0]) + low)
    start = (math.floor(state.agent.x), math.floor(state.agent.y))
    maze = Maze(cells, low, size, start, cheese, region)
    edges = sum(len(maze.neighbours(c)) for c in cells) // 2
    if start not in cells or maze.corner not in cells or edges != len(cells) - 1:
        raise ProclabError(
            "not a procgen maze: its open cells do not form a tree holding the start and corner"
        )
    if len(maze._tree_from(start)) != len(cells):
        raise ProclabError("not a procgen maze: some open cells cannot be reached from the start")
    return maze
