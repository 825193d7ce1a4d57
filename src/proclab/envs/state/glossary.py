"""What each game's entity types and grid cells are, by name; and which kind is the goal.

Names follow the constants of procgen 0.10.7's ``src/games/<game>.cpp`` and ``object-ids.h``
(lower-cased), renamed where the game shows something more specific (coinrun's ``GOAL`` is the
coin, maze's the cheese, heist's ``EXIT`` the gem). A kind names either entities or cells of a
game, never both, so an edit by kind is unambiguous. ``hazards`` groups the kinds whose touch ends
an episode by death under a cause's name, where the game's code says so (coinrun's
``handle_agent_collision`` and ``handle_grid_collision``: saws, walking enemies, lava), so that an
analysis can say what killed the agent. Values the tables do not name get ``type<N>``
(entities) or ``cell<N>`` (cells): they are shown, never refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from proclab.envs.games import check_game
from proclab.errors import unknown_choice

SPACE = 100  # the empty cell of every game
WALL = 51  # procgen's generic wall (WALL_OBJ)

# Types shared by all games (object-ids.h; EXPLOSION2..5 exist there but no game spawns them).
_COMMON_ENTITIES = {0: "agent", 54: "explosion", 59: "trail"}
_COMMON_CELLS = {SPACE: "space"}
# Short-lived visual effects, and cells that only exist while a level is generated: they say
# nothing about the level, so features and events leave them out.
_NOT_FOLLOWED = frozenset({"explosion", "trail", "laser_trail", "exhaust", "dust_cloud", "marker"})


@dataclass(frozen=True)
class Glossary:
    """One game's names: ``entities`` maps entity type -> kind, ``cells`` cell value -> kind."""

    game: str
    entities: dict[int, str]
    cells: dict[int, str]
    goal: str | None
    """The kind the agent must reach to complete the level (an entity or a cell kind), if any."""
    hazards: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Cause of death -> the kinds whose touch kills the agent (empty: not named for this game)."""

    def entity_kinds(self) -> list[str]:
        """Entity kinds other than the agent, in type order (the features' and events' order)."""
        return [kind for t, kind in sorted(self.entities.items()) if t != 0]

    def cell_kinds(self) -> list[str]:
        """Cell kinds other than empty space, in value order."""
        return [kind for v, kind in sorted(self.cells.items()) if v != SPACE]

    def feature_kinds(self) -> list[str]:
        """The kinds features and events follow: every entity and cell kind except the agent, empty
        space, visual effects (explosions, trails, exhaust) and generation-time markers."""
        return [k for k in (*self.entity_kinds(), *self.cell_kinds()) if k not in _NOT_FOLLOWED]

    def is_cell(self, kind: str) -> bool:
        return kind in self._cell_kinds

    @cached_property
    def _cell_kinds(self) -> frozenset[str]:
        return frozenset(self.cells.values())

    def type_of(self, kind: str) -> int:
        """The entity type or cell value of ``kind``; a one-line error names the game's kinds."""
        value = self._values.get(kind)
        if value is None:
            raise unknown_choice(f"kind for {self.game}", kind, [*self.entity_kinds(), *self.cell_kinds()])
        return value

    @cached_property
    def _values(self) -> dict[str, int]:
        return {name: value for table in (self.entities, self.cells) for value, name in table.items()}


def _g(
    game: str,
    entities: dict[int, str],
    cells: dict[int, str],
    goal: str | None,
    hazards: dict[str, tuple[str, ...]] | None = None,
) -> Glossary:
    return Glossary(game, {**_COMMON_ENTITIES, **entities}, {**_COMMON_CELLS, **cells}, goal, hazards or {})


_PLATFORM_WALLS = {15: "wall_mid", 16: "wall_top", 19: "enemy_barrier"}

_GLOSSARIES = {
    g.game: g
    for g in (
        _g("bigfish", {2: "fish"}, {}, None),
        _g(
            "bossfight",
            {
                1: "player_bullet",
                2: "boss",
                3: "shields",
                4: "enemy_bullet",
                5: "laser_trail",
                6: "reflected_bullet",
                7: "barrier",
            },
            {},
            None,
        ),
        _g(
            "caveflyer",
            {1: "goal", 2: "obstacle", 3: "target", 4: "player_bullet", 5: "enemy", 9: "exhaust"},
            {WALL: "wall", 8: "cavewall", 1003: "marker"},
            "goal",
        ),
        _g(
            "chaser",
            {2: "large_orb", 3: "enemy_weak", 4: "enemy_egg", 6: "enemy", 7: "enemy2", 8: "enemy3"},
            {5: "maze_wall", 1001: "marker", 1002: "orb"},
            None,
        ),
        _g("climber", {1: "coin", 5: "enemy", 6: "enemy1", 7: "enemy2"}, dict(_PLATFORM_WALLS), None),
        _g(
            "coinrun",
            {2: "saw", 3: "saw2", 5: "enemy", 6: "enemy1", 7: "enemy2", 20: "crate"},
            {1: "coin", **_PLATFORM_WALLS, 17: "lava_mid", 18: "lava_top"},
            "coin",
            # SAW2, ENEMY1 and ENEMY2 are image types of the same hazards (a saw's and an enemy's looks)
            {
                "saw": ("saw", "saw2"),
                "enemy": ("enemy", "enemy1", "enemy2"),
                "lava": ("lava_mid", "lava_top"),
            },
        ),
        _g(
            "dodgeball",
            {
                1: "lava_wall",
                3: "player_ball",
                4: "enemy",
                5: "door",
                6: "enemy_ball",
                7: "door_open",
                8: "dust_cloud",
                10: "oob_wall",
            },
            {},
            "door",
        ),
        _g(
            "fruitbot",
            {
                1: "barrier",
                2: "out_of_bounds_wall",
                3: "player_bullet",
                4: "bad_fruit",
                7: "good_fruit",
                10: "locked_door",
                11: "lock",
                12: "present",
            },
            {},
            "present",
        ),
        _g("heist", {1: "lock", 2: "key", 9: "gem", 11: "key_on_ring"}, {WALL: "wall"}, "gem"),
        _g("jumper", {1: "carrot", 2: "spike"}, {6: "cavewall", 7: "cavewall_top"}, "carrot"),
        _g("leaper", {1: "log", 4: "car", 5: "finish_line"}, {2: "road", 3: "water"}, "finish_line"),
        _g("maze", {}, {WALL: "wall", 2: "cheese"}, "cheese"),
        _g(
            "miner",
            {5: "enemy", 6: "exit"},
            {1: "boulder", 2: "diamond", 3: "moving_boulder", 4: "moving_diamond", 9: "dirt", 10: "oob_wall"},
            "exit",
        ),
        _g("ninja", {1: "mushroom", 7: "throwing_star"}, {6: "bomb", 14: "fire", 20: "wall_mid"}, "mushroom"),
        _g(
            "plunder",
            {1: "player_bullet", 2: "target_legend", 3: "target_background", 6: "panel", 7: "ship"},
            {},
            None,
        ),
        _g(
            "starpilot",
            {
                1: "player_bullet",
                2: "bullet2",
                3: "bullet3",
                4: "flyer",
                5: "meteor",
                6: "cloud",
                7: "turret",
                8: "fast_flyer",
                9: "finish_line",
            },
            {},
            None,
        ),
    )
}


def glossary(game: str) -> Glossary:
    """The names of ``game``'s entity types and cells (a one-line error for an unknown game)."""
    check_game(game)
    return _GLOSSARIES[game]
