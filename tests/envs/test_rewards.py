"""Reward rules (proclab.envs.rewards): the paid goal ends the episode at the very step a slow reference finds the
agent on it, the game's own goal pays nothing, the next level keeps the slot's split and the level rule, a run
resumes exactly, and a rule of another game is one line."""

import math

import numpy as np
import pytest

from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs.state import parse_state, positions
from proclab.errors import ProclabError
from proclab.rl.config import PRESETS

LEVEL_RULE = {"coinrun": "coin-moved", "maze": "cheese-region:size=99"}
REWARD_RULE = {"coinrun": "end-pays", "maze": "corner-pays"}
MOVES = {"coinrun": [7, 8, 8, 5], "maze": [1, 3, 5, 7]}  # right, up-right, up / left, down, up, right


def paid_cell(first) -> tuple[int, int]:
    """The reference: CoinRun's end cell (the lowest open cell of the rightmost column not all wall), Maze's
    top-right maze cell, as ``(row, col)``, written here from the level's grid."""
    grid = np.asarray(first.grid)
    if first.game == "maze":
        size, world = int(first.extra.maze_dim), int(first.extra.world_dim)
        top = (world - size) // 2 + size - 1
        return top, top
    wall = np.isin(grid, [15, 16])
    col = max(c for c in range(grid.shape[1]) if not wall[:, c].all())
    return min(r for r in range(grid.shape[0]) if not wall[r, col]), col


def on_cell(state, cell) -> bool:
    """Whether the agent is on ``cell`` as the game tests its goal: Maze its cell, CoinRun its box less 0.001."""
    a, (row, col) = state.agent, cell
    if state.game == "maze":
        return (int(a.y), int(a.x)) == (row, col)
    cols = range(math.floor(a.x - a.rx + 0.001), math.floor(a.x + a.rx - 0.001) + 1)
    rows = range(math.floor(a.y - a.ry + 0.001), math.floor(a.y + a.ry - 0.001) + 1)
    return col in cols and row in rows


def env(game: str, reward_rule: str = "", seed: int = 5, n: int = 1, split: str = "0:40") -> ProcgenVecEnv:
    config = EnvConfig(game=(game,), num_envs=n, split=split, level_rule=LEVEL_RULE[game], num_threads=1)
    return ProcgenVecEnv(config, seed=seed, reward_rule=reward_rule)


@pytest.mark.parametrize("game", ["coinrun", "maze"])
def test_the_paid_goal_ends_the_episode_where_a_reference_finds_the_agent_on_it(game):
    """Per env seed (a level each), one action sequence played twice: in the plain env, parsing every state, the
    first step that puts the agent on the paid cell (or the game's own end); in the ruled env the first episode
    must end at that step, paid 10 exactly when it was the cell."""
    outcomes = set()
    for seed in range(12):
        rng = np.random.default_rng(seed)
        actions = rng.choice(MOVES[game], size=400)
        plain = env(game, seed=seed)
        plain.reset()
        first = parse_state(plain.slot_state(0))
        cell = paid_cell(first)
        ((gx, gy),) = positions(first, "coin" if game == "coinrun" else "cheese")
        goal_on_cell = (int(gy), int(gx)) == cell
        expected = None
        for t, a in enumerate(actions):
            _, reward, term, trunc, info = plain.step(np.array([a]))
            if term[0] or trunc[0]:  # the game ended it first: the coin or cheese, a death, the time
                paid = bool(info["episode"]["level_complete"][0]) and goal_on_cell
                expected = (t, 10.0 if paid else 0.0)
                break
            if on_cell(parse_state(plain.slot_state(0)), cell):
                expected = (t, 10.0)
                break
        ruled = env(game, REWARD_RULE[game], seed=seed)
        ruled.reset()
        got = None
        for t, a in enumerate(actions):
            _, reward, term, trunc, info = ruled.step(np.array([a]))
            if info["episode"]["done"][0]:
                ep = info["episode"]
                got = (t, float(reward[0]))
                assert ep["return"][0] == reward[0] and ep["length"][0] == t + 1
                assert bool(ep["level_complete"][0]) == (reward[0] == 10.0)
                assert (term[0] and not trunc[0]) or reward[0] == 0.0
                break
            assert reward[0] == 0.0  # the coin or cheese pays nothing, nothing else pays
        assert got == expected, f"seed {seed}"
        outcomes.add(expected[1] if expected else None)
    assert outcomes >= {0.0, 10.0}  # both kinds of end were played


def test_after_a_paid_end_the_slot_plays_on_through_its_split_with_the_level_rule():
    ruled = env("coinrun", REWARD_RULE["coinrun"], n=8, split="100:30")
    ruled.reset()
    rng = np.random.default_rng(0)
    paid_next, later = [], []
    for _ in range(1500):
        _, reward, _, _, info = ruled.step(rng.choice(MOVES["coinrun"], size=8))
        ended = info["episode"]["done"]
        for slot in np.flatnonzero(ended):
            state = parse_state(ruled.slot_state(int(slot)))
            assert (
                100 <= info["level_seed"][slot] < 130
                and state.header.current_level_seed == info["level_seed"][slot]
            )
            assert (state.header.level_seed_low, state.header.level_seed_high) == (100, 130)
            (col, row), end = positions(state, "coin")[0], paid_cell(state)
            assert (int(row), int(col)) != end  # the next level was edited by coin-moved too
            (paid_next if reward[slot] == 10 else later).append(int(info["level_seed"][slot]))
    assert len(paid_next) >= 10 and len(set(paid_next)) >= 5, paid_next
    assert len(set(later)) >= 5  # the game's own ends after a paid end still draw the split, not one level


def test_a_ruled_env_resumes_exactly_from_its_state():
    a = env("maze", REWARD_RULE["maze"], n=6)
    a.reset()
    rng = np.random.default_rng(1)
    for _ in range(300):
        a.step(rng.choice(MOVES["maze"], size=6))
    saved = a.get_state()
    b = env("maze", REWARD_RULE["maze"], n=6)
    b.set_state(saved)
    paid = 0
    for _ in range(600):
        actions = rng.choice([1, 3, 5, 5, 5, 7, 7, 7], size=6)  # mostly up and right: the corner is reached
        oa, ra, ta, _, ia = a.step(actions)
        ob, rb, tb, _, ib = b.step(actions)
        assert np.array_equal(oa, ob) and np.array_equal(ra, rb) and np.array_equal(ta, tb)
        assert np.array_equal(ia["level_seed"], ib["level_seed"])
        paid += int((ra == 10).sum())
    assert paid >= 3  # paid ends, with their drawn next levels, happened after the restore


def test_a_reward_rule_of_another_game_or_an_unknown_one_is_one_line():
    with pytest.raises(ProclabError, match="reward rule end-pays pays in coinrun; the env plays maze"):
        env("maze", "end-pays")
    with pytest.raises(ProclabError, match="reward rule"):
        env("maze", "cheese-pays")
    config = PRESETS["tiny"]
    with pytest.raises(ProclabError, match="corner-pays pays in maze"):
        type(config)(**{**config.__dict__, "reward_rule": "corner-pays"}).validate()
