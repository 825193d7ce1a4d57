"""Ground-truth positions over the episode viewer's frames, from a recording's stored ground truth.

``proclab record`` stores per step the agent's position, the goal's and the offset of the nearest
thing of every kind (``features``, :mod:`proclab.record.ground_truth`), and each episode's first
game state. The camera procgen draws a frame with depends only on that level's constants (view
size, level size, whether the agent is centred) and the agent's position, so each step's world
positions become pixels with :func:`proclab.envs.state.to_pixels` applied to the first state with the
agent put where the step's features say it was: no replay needed.

A window's markers are ``{"names": [...], "x": [[...]], "y": [[...]]}``: per step, per marker, the
pixel column and row in the agent's 64x64 frame (``null`` where the step has no such thing).
Markers: ``agent``, ``goal`` (null in games without one), then the nearest of each kind (``<kind>``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from proclab.envs.state import GameState, parse_state, to_pixels
from proclab.envs.state.model import agent_index
from proclab.store.schema import GROUND_TRUTH_ATTR, INITIAL_STATE, has_first_states

FRAME = 64


def _marker_columns(names: list[str]) -> list[tuple[str, int | None, int | None, bool]]:
    """(marker, x column, y column, relative to the agent) for every marker the feature names allow."""
    col = {n: i for i, n in enumerate(names)}
    markers = [("agent", col["agent_x"], col["agent_y"], False)]
    if "goal_x" in col:
        markers.append(("goal", col["goal_x"], col["goal_y"], False))
    for name in names:
        if name.endswith("_dx") and name[:-3] + "_dy" in col:
            markers.append((name[:-3], col[name], col[name[:-3] + "_dy"], True))
    return markers


def _with_agent_at(state: GameState, x: float, y: float) -> GameState:
    entities = list(state.entities)
    i = agent_index(entities)
    entities[i] = dataclasses.replace(entities[i], x=x, y=y)
    return dataclasses.replace(state, entities=entities)


def truth_markers(store, episode: int, start: int, stop: int) -> dict | None:
    """Markers of steps ``[start, stop)`` of ``episode`` (see the module docstring), or None when the store
    has no ground truth (recorded with ``--no-ground-truth``, before proclab stored it, or simulated)."""
    if "features" not in store.step_fields or not has_first_states(store):
        return None
    shard = store.shards[int(store.episodes["shard"][episode])]
    names = (shard.attrs.get(GROUND_TRUTH_ATTR) or {}).get("features")
    if not names:
        return None
    features = store.read(episode, ["features"], start, stop)["features"].astype(np.float64)
    first = parse_state(store.read_blob(INITIAL_STATE, episode))
    markers = _marker_columns(names)
    xs, ys = np.full((len(features), len(markers)), np.nan), np.full((len(features), len(markers)), np.nan)
    for t, row in enumerate(features):
        ax, ay = row[markers[0][1]], row[markers[0][2]]
        if np.isnan(ax):
            continue
        wx = np.array([row[i] + (ax if rel else 0.0) for _, i, _, rel in markers])
        wy = np.array([row[j] + (ay if rel else 0.0) for _, _, j, rel in markers])
        xs[t], ys[t] = to_pixels(_with_agent_at(first, ax, ay), wx, wy, size=FRAME)
    return {"names": [m[0] for m in markers], "x": _json(xs), "y": _json(ys)}


def _json(values: np.ndarray) -> list[list[float | None]]:
    return [[None if np.isnan(v) else round(float(v), 2) for v in row] for row in values]
