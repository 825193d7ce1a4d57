"""The game's state as data, for all 16 Procgen games (procgen 0.10.7's serialization).

``parse_state(env.get_state()[i])`` gives a typed :class:`GameState` (grid, entities, agent, the
game's own fields); ``serialize_state`` gives back the identical bytes, and after an edit
(:func:`remove_entities`, :func:`move_entity`, :func:`add_entity`, :func:`move_agent`) bytes that
procgen's ``set_state`` plays. :func:`glossary` names each game's entity and cell types,
:func:`to_pixels` places world points on the observation, :func:`features` and :func:`events`
turn states into per-step ground truth, :func:`episode_goals` (and :class:`GoalTracker`, per step)
says which of a game's two goals an episode reached (CoinRun's coin and end, Maze's cheese and corner). docs/ground-truth.md lists every game's fields and names.
"""

from proclab.envs.state.camera import camera, to_pixels
from proclab.envs.state.edit import add_entity, check_open, move_agent, move_entity, remove_entities
from proclab.envs.state.features import event_names, events, feature_names, features, positions
from proclab.envs.state.glossary import Glossary, glossary
from proclab.envs.state.goals import (
    GoalTracker,
    corner_cell,
    end_cell,
    episode_goals,
    goal_names,
    maze_square,
)
from proclab.envs.state.model import Entity, GameState, parse_state, serialize_state

__all__ = [
    "Entity",
    "GameState",
    "Glossary",
    "GoalTracker",
    "add_entity",
    "camera",
    "check_open",
    "corner_cell",
    "end_cell",
    "episode_goals",
    "event_names",
    "events",
    "feature_names",
    "features",
    "glossary",
    "goal_names",
    "maze_square",
    "move_agent",
    "move_entity",
    "parse_state",
    "positions",
    "remove_entities",
    "serialize_state",
    "to_pixels",
]
