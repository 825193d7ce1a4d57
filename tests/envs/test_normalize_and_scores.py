"""Reward normalisation against a slow reference; normalised scores."""

import numpy as np
import pytest

from proclab.envs import EnvConfig, ProcgenVecEnv, RewardNormalizer, normalized_score, score_bounds
from proclab.envs.scores import mean_normalized_score, score_table
from proclab.errors import ProclabError


class _ScriptedEnv:
    """Rewards and dones from arrays: a stand-in env whose signals we control."""

    def __init__(self, rewards, dones):
        self.rewards, self.dones, self.t = rewards, dones, 0
        self.num_envs = rewards.shape[1]

    def reset(self):
        return None, {}

    def step(self, actions):
        r, d = self.rewards[self.t], self.dones[self.t]
        self.t += 1
        return None, r, d, np.zeros_like(d), {}


def _reference(rewards, dones, gamma, clip=10.0, eps_count=1e-4, eps=1e-8):
    """Slow and obvious: the variance of every discounted return seen so far, mixed with the
    prior pseudo-observation (weight eps_count, mean 0, variance 1) the running estimate starts from."""
    T, N = rewards.shape
    G = np.zeros(N)
    history = []
    out = np.zeros_like(rewards)
    for t in range(T):
        for i in range(N):
            G[i] = G[i] * gamma + rewards[t, i]
        history.extend(G.tolist())
        x = np.array(history)
        mean = x.sum() / (eps_count + len(x))
        var = (eps_count * (1 + mean**2) + ((x - mean) ** 2).sum()) / (eps_count + len(x))
        for i in range(N):
            out[t, i] = min(max(rewards[t, i] / np.sqrt(var + eps), -clip), clip)
            if dones[t, i]:
                G[i] = 0.0
    return out


@pytest.mark.parametrize("gamma", [0.99, 0.999])
def test_reward_normalizer_matches_reference(gamma):
    rng = np.random.default_rng(0)
    T, N = 120, 5
    rewards = (rng.random((T, N)) < 0.1) * rng.choice([1.0, 10.0, -2.0], (T, N))
    dones = rng.random((T, N)) < 0.05
    env = RewardNormalizer(_ScriptedEnv(rewards.astype(np.float32), dones), gamma=gamma)
    got = np.stack([env.step(None)[1] for _ in range(T)])
    np.testing.assert_allclose(got, _reference(rewards, dones, gamma), rtol=1e-5, atol=1e-6)


def test_reward_normalizer_clips_and_keeps_raw_reward():
    rewards = np.zeros((201, 2), np.float32)
    rewards[200] = [1000.0, -1000.0]  # 200 quiet steps, then a reward ~14 running stds large
    env = RewardNormalizer(_ScriptedEnv(rewards, np.zeros((201, 2), bool)), gamma=0.99)
    for _ in range(200):
        env.step(None)
    _, r, _, _, info = env.step(None)
    np.testing.assert_array_equal(r, [10.0, -10.0])
    np.testing.assert_array_equal(info["raw_reward"], [1000.0, -1000.0])


def test_reward_normalizer_state_round_trip_on_real_env():
    env = RewardNormalizer(ProcgenVecEnv(EnvConfig(game=("bigfish",), num_envs=4), seed=0), gamma=0.999)
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(100):
        env.step(rng.integers(0, 15, 4))
    state = env.get_state()
    acts = rng.integers(0, 15, (100, 4))
    a = [env.step(x)[1] for x in acts]
    other = RewardNormalizer(ProcgenVecEnv(EnvConfig(game=("bigfish",), num_envs=4), seed=7), gamma=0.999)
    other.set_state(state)
    b = [other.step(x)[1] for x in acts]
    np.testing.assert_array_equal(np.stack(a), np.stack(b))


def test_normalized_scores():
    assert normalized_score("coinrun", 10.0) == 1.0
    assert normalized_score("coinrun", 5.0) == 0.0
    assert np.isclose(normalized_score("starpilot", 33.25), 0.5)  # (33.25-2.5)/(64-2.5)
    assert np.isclose(normalized_score("starpilot", 18.25, mode="hard"), 0.5)  # (18.25-1.5)/(35-1.5)
    np.testing.assert_allclose(normalized_score("bigfish", [1.0, 40.0]), [0.0, 1.0])
    assert score_bounds("jumper", "easy") == (3, 10)
    assert score_bounds("jumper", "easy", bounds="train-procgen") == (1.0, 10)
    assert score_bounds("leaper", "easy", bounds="train-procgen") == (1.5, 10)
    assert score_bounds("maze", "memory") == score_bounds("maze", "hard")
    assert np.isclose(mean_normalized_score({"coinrun": 10.0, "bigfish": 1.0}), 0.5)
    with pytest.raises(ProclabError, match="unknown score bound set"):
        score_bounds("coinrun", bounds="papr")


def test_modes_without_published_constants_use_the_table_asked_for():
    """Procgen publishes easy and hard constants only: memory (and extreme, exploration) runs use the
    hard ones by default, the easy ones with table="easy"; the choice is explicit, never implied."""
    for mode in ("memory", "extreme", "exploration"):
        assert score_table(mode) == "hard"
        assert score_bounds("heist", mode) == (2, 10)  # hard heist
        assert score_bounds("heist", mode, table="easy") == (3.5, 10)  # easy heist
    assert score_table("easy") == "easy" and score_table("hard", "easy") == "easy"
    assert normalized_score("miner", 7.25, mode="memory", table="easy") == pytest.approx(
        0.5
    )  # (7.25-1.5)/11.5
    assert mean_normalized_score({"maze": 7.5}, mode="memory", table="easy") == pytest.approx(0.5)
    with pytest.raises(ProclabError, match="unknown score table"):
        score_table("memory", "medium")


def test_published_table_mean_reproduces_anchor():
    """The 16-game easy 200-level test means of the Procgen paper score 0.340 with these constants."""
    test_returns = dict(
        coinrun=8.70,
        starpilot=23.53,
        caveflyer=5.13,
        dodgeball=1.98,
        fruitbot=26.56,
        chaser=6.17,
        miner=9.40,
        jumper=5.69,
        leaper=5.96,
        maze=5.54,
        bigfish=4.74,
        heist=2.54,
        climber=6.13,
        plunder=4.76,
        ninja=5.69,
        bossfight=7.58,
    )
    assert abs(mean_normalized_score(test_returns) - 0.340) < 0.006
