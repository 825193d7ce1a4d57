"""Per-kind reach (``near_kinds``) against a slow reference on the full parse: every entity and every
grid cell of the state, one at a time, on real states of maze and coinrun, some of them with the agent
moved next to an instance of a kind so that both answers occur for most kinds."""

import numpy as np
import pytest

from level_fixtures import moved_next_to_kinds
from proclab.envs.state import glossary, parse_state
from proclab.envs.state.model import PLAYER
from proclab.envs.state.sample import random_states
from proclab.interpret.steering.reach import near_kinds
from proclab.record.ground_truth import kind_gaps


def _slow_near(state, kind: str, gap: float) -> bool:
    names = glossary(state.game)
    me = state.agent
    value = names.type_of(kind)
    if names.is_cell(kind):
        h, w = state.grid.shape
        for row in range(h):
            for col in range(w):
                if state.grid[row, col] != value:
                    continue
                gx = abs(me.x - (col + 0.5)) - me.rx - 0.5
                gy = abs(me.y - (row + 0.5)) - me.ry - 0.5
                if max(gx, gy) <= gap:
                    return True
        return False
    for e in state.entities:
        if e.type != value or e.type == PLAYER or e.use_abs_coords:
            continue
        if max(abs(e.x - me.x) - me.rx - e.rx, abs(e.y - me.y) - me.ry - e.ry) <= gap:
            return True
    return False


@pytest.mark.parametrize("game,mode", [("maze", "easy"), ("coinrun", "hard")])
def test_near_kinds_is_the_slow_definition(game, mode):
    states = list(random_states(game, mode, 30, seed=5, num_envs=2, keep_prob=0.2))
    states += moved_next_to_kinds(states, np.random.default_rng(0))
    names = glossary(game)
    kinds = names.feature_kinds()
    types = np.array([names.type_of(k) for k in kinds])
    is_cell = np.array([names.is_cell(k) for k in kinds])
    seen = []
    for gap in (0.0, 0.5, 2.0):
        for s in states:
            got = near_kinds(s, types, is_cell, gap)
            parsed = parse_state(s)
            want = [_slow_near(parsed, kind, gap) for kind in kinds]
            assert got.tolist() == want, (gap, kinds)
            seen.append(got)
    seen = np.array(seen)
    goal = kinds.index(names.goal)
    assert seen[:, goal].any() and not seen[:, goal].all()  # the test sees both answers for the goal


def _slow_gap(state, value: int, cell: bool) -> float:
    """The smallest box gap between the agent and any entity or cell of ``value``, one at a time."""
    me, best = state.agent, np.inf
    if cell:
        h, w = state.grid.shape
        for row in range(h):
            for col in range(w):
                if state.grid[row, col] == value:
                    gap = max(abs(me.x - (col + 0.5)) - me.rx - 0.5, abs(me.y - (row + 0.5)) - me.ry - 0.5)
                    best = min(best, gap)
        return best
    for e in state.entities:
        if e.type == value and e.type != PLAYER and not e.use_abs_coords:
            best = min(best, max(abs(e.x - me.x) - me.rx - e.rx, abs(e.y - me.y) - me.ry - e.ry))
    return best


def test_kind_gaps_are_the_slow_nearest_gaps_on_real_coinrun_states():
    states = list(random_states("coinrun", "hard", 20, seed=9, num_envs=2, keep_prob=0.2))
    states += moved_next_to_kinds(states, np.random.default_rng(1))
    names = glossary("coinrun")
    kinds = names.feature_kinds()
    types = np.array([names.type_of(k) for k in kinds])
    is_cell = np.array([names.is_cell(k) for k in kinds])
    finite = 0
    for s in states:
        parsed = parse_state(s)
        want = [_slow_gap(parsed, int(t), bool(c)) for t, c in zip(types, is_cell, strict=True)]
        got = kind_gaps(s, types, is_cell)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        finite += int(np.isfinite(got).sum())
    assert finite > len(states)  # most states hold several kinds
