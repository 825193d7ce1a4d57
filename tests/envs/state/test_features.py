"""Features and events against slow, obvious references and against what the env itself reports."""

import math

import numpy as np
import pytest

from proclab.envs._procgen import ProcgenBackend
from proclab.envs.games import GAMES
from proclab.envs.state import event_names, events, feature_names, features, glossary, parse_state
from proclab.envs.state.sample import random_states


def _reference_features(state) -> list[float]:
    """Loop over every entity and every cell by hand; nearest by plain Euclidean distance."""
    names = glossary(state.game)
    agent = state.agent
    points: dict[str, list[tuple[float, float]]] = {}
    for entity in state.entities:
        if entity.type != 0 and not entity.use_abs_coords:
            points.setdefault(names.entities.get(entity.type, ""), []).append((entity.x, entity.y))
    height, width = state.grid.shape
    for row in range(height):
        for col in range(width):
            points.setdefault(names.cells.get(int(state.grid[row, col]), ""), []).append(
                (col + 0.5, row + 0.5)
            )

    def nearest(kind):
        best = None
        for x, y in points.get(kind, []):
            d = math.sqrt((x - agent.x) ** 2 + (y - agent.y) ** 2)
            if best is None or d < best[2]:
                best = (x - agent.x, y - agent.y, d)
        return best or (math.nan, math.nan, math.nan)

    values = [agent.x, agent.y, agent.vx, agent.vy]
    if names.goal:
        dx, dy, d = nearest(names.goal)
        values += [agent.x + dx, agent.y + dy, d]
    else:
        values += [math.nan] * 3
    for kind in names.feature_kinds():
        values += list(nearest(kind)[:2])
    return values


@pytest.mark.parametrize("game", GAMES)
def test_features_match_a_by_hand_reference(game):
    for data in random_states(game, "hard", count=6, seed=3):
        state = parse_state(data)
        got = features(state)
        assert got.dtype == np.float32 and got.shape == (len(feature_names(game)),)
        np.testing.assert_allclose(
            got, np.array(_reference_features(state), dtype=np.float32), rtol=1e-6, atol=1e-6
        )


def test_names_are_unique_and_events_have_their_length():
    for game in GAMES:
        assert len(set(feature_names(game))) == len(feature_names(game))
        assert len(set(event_names(game))) == len(event_names(game))
    assert feature_names("maze") == [
        *("agent_x", "agent_y", "agent_vx", "agent_vy", "goal_x", "goal_y", "goal_distance"),
        *("cheese_dx", "cheese_dy", "wall_dx", "wall_dy"),
    ]


@pytest.mark.parametrize("game", ["coinrun", "chaser", "maze", "miner"])
def test_events_agree_with_the_env_rewards_and_episode_ends(game):
    """Play random actions; the env's own reward and episode-end flags are the independent record."""
    backend = ProcgenBackend(4, game, distribution_mode="easy", num_levels=0, start_level=5, rand_seed=5)
    rng = np.random.default_rng(0)
    names = event_names(game)
    seen = dict.fromkeys(names, 0)
    try:
        before = [parse_state(b) for b in backend.get_state()]
        for _ in range(400):
            backend.act(rng.integers(0, 15, 4).astype(np.int32))
            _, reward, first, _ = backend.observe()
            after = [parse_state(b) for b in backend.get_state()]
            for i in range(4):
                happened = dict(zip(names, events(before[i], after[i]), strict=True))
                assert happened["reward"] == (reward[i] != 0)
                assert happened["level_complete"] + happened["died"] + happened["timeout"] == int(first[i])
                for name, value in happened.items():
                    seen[name] += int(value)
            before = after
    finally:
        backend.close()
    assert seen["reward"] > 0 and seen["died"] + seen["level_complete"] > 0
    if game == "chaser":  # every orb eaten pays: the removed-orb events are the orb rewards
        assert seen["orb_removed"] > 0
