"""Mazes drawn as text, for the tests of the maze geometry and of the goals an episode reached."""

from proclab.interpret.goals.maze import Maze


def ascii_maze(rows: list[str], region: int = 5) -> Maze:
    """Rows top first: ``#`` wall, ``.`` open, ``S`` start, ``C`` cheese; the square is the whole picture."""
    size = len(rows)
    cells, start, cheese = set(), None, None
    for r, line in enumerate(rows):
        y = size - 1 - r
        for x, ch in enumerate(line):
            if ch != "#":
                cells.add((x, y))
            start = (x, y) if ch == "S" else start
            cheese = (x, y) if ch == "C" else cheese
    return Maze(frozenset(cells), 0, size, start, cheese, region)
