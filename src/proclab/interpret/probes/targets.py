"""What probes predict: the ground truth ``proclab record`` stored with every step.

A store recorded with ground truth holds per-step ``features`` (names in the shard attribute
``ground_truth``; :mod:`proclab.envs.state.features` defines them), ``events``, and each episode's
first game state. A *target* is one feature or event column by name. An *entity position* for
the spatial probes is ``agent`` (``agent_x, agent_y``), ``goal`` (``goal_x, goal_y``) or any kind with
offsets (``agent + <kind>_dx, <kind>_dy``, the nearest one), in world units, turned into pixels of
the agent's observation with :func:`proclab.envs.state.to_pixels`.

Pixels need the camera of each step. Procgen's camera is either fixed for a level or follows the
agent, so its centre is an affine function of the agent's position with per-level constants;
those are found by placing the agent at two points of the episode's first state
(:func:`~proclab.envs.state.move_agent`) and asking :func:`~proclab.envs.state.camera`, so the
camera's rules stay in one place.
"""

from __future__ import annotations

import numpy as np

from proclab.envs.state import camera, move_agent, parse_state, to_pixels
from proclab.errors import ProclabError, unknown_choice
from proclab.levels.export import INITIAL_STATE, has_first_states
from proclab.store import EpisodeStore
from proclab.store.schema import GROUND_TRUTH_ATTR


def ground_truth_names(store: EpisodeStore) -> dict[str, list[str]]:
    """``{"features": [...], "events": [...]}`` of a store recorded with ground truth (refused otherwise)."""
    for shard in store.shards:
        names = shard.attrs.get(GROUND_TRUTH_ATTR)
        if names:
            return names
    raise ProclabError(
        f"episode store {str(store.path)!r} holds no ground truth; record it with `proclab record` "
        "(ground truth is on by default; --no-ground-truth turns it off)"
    )


def target_values(store: EpisodeStore, name: str, episodes: np.ndarray) -> np.ndarray:
    """The feature or event column ``name`` at every step of ``episodes`` (float64; NaN where absent)."""
    names = ground_truth_names(store)
    for field in ("features", "events"):
        if name in names.get(field, []):
            col = names[field].index(name)
            return store.read_steps(field, episodes)[:, col].astype(np.float64)
    raise unknown_choice("target", name, names.get("features", []) + names.get("events", []))


def entity_names(store: EpisodeStore) -> list[str]:
    """The entity positions a store's features give: agent, goal (if any) and every kind with offsets."""
    feats = ground_truth_names(store)["features"]
    kinds = [n.removesuffix("_dx") for n in feats if n.endswith("_dx")]
    return ["agent", *(["goal"] if "goal_x" in feats else []), *kinds]


def world_positions(store: EpisodeStore, entity: str, episodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World ``(x, y)`` of ``entity`` at every step of ``episodes``."""
    if entity not in entity_names(store):
        raise unknown_choice("entity", entity, entity_names(store))
    col = {n: target_values(store, n, episodes) for n in ("agent_x", "agent_y")}
    if entity == "agent":
        return col["agent_x"], col["agent_y"]
    if entity == "goal":
        return target_values(store, "goal_x", episodes), target_values(store, "goal_y", episodes)
    dx, dy = (target_values(store, f"{entity}_{a}", episodes) for a in ("dx", "dy"))
    return col["agent_x"] + dx, col["agent_y"] + dy


def pixel_positions(store: EpisodeStore, entity: str, episodes: np.ndarray) -> np.ndarray:
    """``(N, 2)`` pixel ``(px, py)`` of ``entity`` in each step's observation (NaN where there is none)."""
    if not has_first_states(store):
        raise ProclabError(
            f"episode store {str(store.path)!r} has no episodes' first states; record it again with ground truth"
        )
    x, y = world_positions(store, entity, episodes)
    ax, ay = world_positions(store, "agent", episodes)
    lengths = np.asarray(store.episodes["length"])[episodes]
    out = np.full((len(x), 2), np.nan)
    start = 0
    for e, n in zip(episodes, lengths, strict=True):
        rows = slice(start, start + int(n))
        start += int(n)
        origin = move_agent(parse_state(store.read_blob(INITIAL_STATE, int(e))), (0.0, 0.0))
        c0, c1 = camera(origin), camera(move_agent(origin, (1.0, 1.0)))
        kx, ky = c1[0] - c0[0], c1[1] - c0[1]  # 1 where the camera follows the agent, 0 where it is fixed
        out[rows, 0], out[rows, 1] = to_pixels(origin, x[rows] - kx * ax[rows], y[rows] - ky * ay[rows])
    return out
