"""Maze geometry against a slow reference: every simple path enumerated by depth-first search on hand-made
and random small mazes (a tree has exactly one), the decision square as the farthest cell the two paths
share, distances to the top-right region by brute force; and procgen's own levels read as trees."""

import dataclasses
import itertools
import math
import random

import pytest

from maze_drawings import ascii_maze
from proclab.errors import ProclabError
from proclab.interpret.goals.maze import FEATURES, Maze, maze_of
from proclab.levels.level import Level


def all_simple_paths(cells, a, b) -> list[list]:
    """Every simple path from ``a`` to ``b``, by exhaustive depth-first search."""
    found, stack = [], [[a]]
    while stack:
        path = stack.pop()
        if path[-1] == b:
            found.append(path)
            continue
        x, y = path[-1]
        for n in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if n in cells and n not in path:
                stack.append([*path, n])
    return found


def reference_path(cells, a, b) -> list:
    paths = all_simple_paths(cells, a, b)
    assert len(paths) == 1, "a maze is a tree: one simple path between two cells"
    return paths[0]


def reference_decision_square(maze: Maze):
    to_cheese = reference_path(maze.open_cells, maze.start, maze.cheese)
    to_corner = reference_path(maze.open_cells, maze.start, maze.corner)
    if maze.cheese in to_corner or maze.corner in to_cheese:
        return None
    shared = set(to_cheese) & set(to_corner)
    return max(shared, key=lambda c: len(reference_path(maze.open_cells, maze.start, c)))


def random_maze(n: int, rng: random.Random, region: int = 3) -> Maze:
    """A perfect maze on the odd cells of an ``(2n+1)``-wide square, by randomised Kruskal; the square is the
    open part (``2n - 1`` wide, from ``(1, 1)``), as procgen carves it."""
    parent = {}

    def root(c):
        while parent.setdefault(c, c) != c:
            c = parent[c]
        return c

    nodes = [(2 * i + 1, 2 * j + 1) for i in range(n) for j in range(n)]
    walls = [((x, y), (x + 2, y)) for x, y in nodes if x + 2 < 2 * n] + [
        ((x, y), (x, y + 2)) for x, y in nodes if y + 2 < 2 * n
    ]
    rng.shuffle(walls)
    cells = set(nodes)
    for a, b in walls:
        if root(a) != root(b):
            parent[root(a)] = root(b)
            cells.add(((a[0] + b[0]) // 2, (a[1] + b[1]) // 2))
    return Maze(frozenset(cells), 1, 2 * n - 1, (1, 1), rng.choice(sorted(cells)), region)


def test_a_planted_maze_has_the_decision_square_drawn_in_it():
    # paths part at D (2, 2): left and up to the cheese, right and up to the corner
    maze = ascii_maze(
        [
            "C##..",
            ".##.#",
            "..D..",
            "##.##",
            "S....",
        ]
    )
    square = (2, 2)
    assert maze.corner == (4, 4) and maze.decision_square == square
    assert maze.branches() == ((1, 2), (3, 2))
    assert maze.steps(maze.start, maze.cheese) == 8 and maze.steps(square, maze.corner) == 4


def test_no_decision_square_when_the_cheese_is_on_the_way_to_the_corner():
    maze = ascii_maze(
        [
            "....C",
            ".####",
            "...##",
            "##.##",
            "S....",
        ]
    )
    maze = Maze(maze.open_cells | {(4, 4)}, 0, 5, maze.start, (2, 4), 5)
    assert maze.cheese in reference_path(maze.open_cells, maze.start, maze.corner)
    assert maze.decision_square is None and maze.branches() is None
    with pytest.raises(ProclabError, match="no decision square"):
        maze.features()


@pytest.mark.parametrize("seed", range(25))
def test_geometry_matches_brute_force_on_random_mazes(seed):
    rng = random.Random(seed)
    maze = random_maze(4, rng)
    cells = maze.open_cells
    for a, b in itertools.combinations(rng.sample(sorted(cells), 6), 2):
        assert maze.path(a, b) == reference_path(cells, a, b)
        assert maze.steps(a, b) == len(reference_path(cells, a, b)) - 1
    assert maze.decision_square == reference_decision_square(maze)
    region = [c for c in cells if c[0] >= 1 + 7 - 3 and c[1] >= 1 + 7 - 3]
    for a in rng.sample(sorted(cells), 4):
        assert maze.steps_to_region(a) == min(len(reference_path(cells, a, c)) - 1 for c in region)
        assert maze.euclid_to_region(a) == pytest.approx(min(math.dist(a, c) for c in region))
    if maze.decision_square is not None:
        f = maze.features()
        assert list(f) == list(FEATURES)
        d = reference_decision_square(maze)
        assert f["steps_between_cheese_decision_square"] == len(reference_path(cells, maze.cheese, d)) - 1
        assert f["euc_dist_cheese_top_right"] == pytest.approx(math.dist(maze.cheese, maze.corner))


def test_procgen_levels_are_trees_with_the_agent_at_the_bottom_left():
    for seed in (3, 11):
        level = Level.generate("maze", seed, mode="easy")
        maze = maze_of(level.parsed, region=5)
        assert maze.start == (maze.low, maze.low) and maze.corner in maze.open_cells
        assert len(maze.open_cells) - 1 == sum(len(maze.neighbours(c)) for c in maze.open_cells) // 2
        assert maze.decision_square == reference_decision_square(maze)


def test_a_maze_with_a_loop_is_refused_in_one_line():
    level = Level.generate("maze", 11, mode="easy")
    state = level.parsed
    maze = maze_of(state)
    grid = state.grid.copy()
    walls = [
        (x, y)
        for x in range(maze.low, maze.low + maze.size)
        for y in range(maze.low, maze.low + maze.size)
        if (x, y) not in maze.open_cells and (x + y) % 2 == 1
    ]
    x, y = walls[0]  # a wall between two open cells: removing it closes a loop
    grid[y, x] = 100

    with pytest.raises(ProclabError, match="not a procgen maze"):
        maze_of(dataclasses.replace(state, grid=grid))
