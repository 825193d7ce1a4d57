"""Vector-env semantics: episode statistics, multi-task slot layout, seeding, state round trip."""

import subprocess
import sys

import numpy as np
import torch

from proclab.envs import EnvConfig, EpisodeLog, ProcgenVecEnv, normalized_score
from proclab.envs._procgen import ProcgenBackend
from proclab.envs.vec_env import _game_seed


def _rollout(env, steps, seed=0):
    rng = np.random.default_rng(seed)
    obs, info = env.reset()
    out = [(obs.copy(), None, info["level_seed"].copy())]
    for _ in range(steps):
        obs, rew, term, trunc, info = env.step(rng.integers(0, 15, env.num_envs))
        out.append((obs.copy(), (rew.copy(), term.copy(), trunc.copy()), info["level_seed"].copy()))
    return out


def test_obs_is_channels_first_view_of_channels_last_buffer():
    env = ProcgenVecEnv(EnvConfig(num_envs=3), seed=0)
    obs, _ = env.reset()
    assert obs.shape == (3, 3, 64, 64)
    t = torch.from_numpy(obs)
    assert t.is_contiguous(memory_format=torch.channels_last)


def test_episode_statistics_match_an_independent_count():
    """Return = sum of the episode's rewards, length = its steps, level = the level it was played on."""
    n = 8
    env = ProcgenVecEnv(EnvConfig(game=("bigfish",), num_envs=n), seed=1)
    _, info = env.reset()
    level, ret, length = info["level_seed"].copy(), np.zeros(n), np.zeros(n, int)
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(600):
        _, rew, term, trunc, info = env.step(rng.integers(0, 15, n))
        ret += rew
        length += 1
        ep = info["episode"]
        done = term | trunc
        np.testing.assert_array_equal(done, ep["done"])
        for i in np.flatnonzero(done):
            assert ep["return"][i] == ret[i]
            assert ep["length"][i] == length[i]
            assert ep["level_seed"][i] == level[i]
            assert trunc[i] == (length[i] >= 1000 and not ep["level_complete"][i])
            checked += 1
        ret[done], length[done] = 0, 0
        level[done] = info["level_seed"][done]
    assert checked >= 8


def test_time_limit_is_truncation():
    env = ProcgenVecEnv(EnvConfig(game=("coinrun",), num_envs=2), seed=0)
    env.reset()
    for t in range(1000):
        _, _, term, trunc, info = env.step(np.full(2, 4))  # no-op never finishes CoinRun
        if t < 999:
            assert not (term | trunc).any()
    assert trunc.all() and not term.any()
    assert (info["episode"]["length"] == 1000).all()


def test_multitask_slot_i_plays_game_i_mod_n():
    games = ("coinrun", "starpilot", "maze")
    env = ProcgenVecEnv(EnvConfig(game=games, num_envs=7), seed=5)
    obs, _ = env.reset()
    np.testing.assert_array_equal(env.game_index, [0, 1, 2, 0, 1, 2, 0])
    # an independent procgen env for starpilot with the same per-game seed sees the same frames
    ref = ProcgenBackend(
        num=2,
        game="starpilot",
        rand_seed=_game_seed(5, 1),
        distribution_mode="easy",
        num_levels=200,
        start_level=0,
    )
    rng = np.random.default_rng(1)
    for _ in range(20):
        a = rng.integers(0, 15, 7)
        obs, *_ = env.step(a)
        ref.act(a[1::3].astype(np.int32))
        rgb = ref.observe()[0]
        np.testing.assert_array_equal(obs[1::3], rgb.transpose(0, 3, 1, 2))


def test_multitask_per_game_statistics():
    games = ("bigfish", "maze")
    env = ProcgenVecEnv(EnvConfig(game=games, num_envs=6), seed=2)
    log = EpisodeLog(games, "easy")
    env.reset()
    rng = np.random.default_rng(0)
    seen = {g: [] for g in games}
    for _ in range(800):
        _, _, _, _, info = env.step(rng.integers(0, 15, 6))
        log.add(info, env.game_index)
        for i in np.flatnonzero(info["episode"]["done"]):
            seen[games[env.game_index[i]]].append(info["episode"]["return"][i])
    s = log.summary()
    for g in games:
        assert seen[g], f"no {g} episode finished"
        assert np.isclose(s[f"{g}/return_mean"], np.mean(seen[g][-100:]))
    expected = np.mean([normalized_score(g, np.mean(seen[g][-100:]), "easy") for g in games])
    assert np.isclose(s["normalized_score"], expected)


def test_same_seed_same_levels_observations_rewards():
    cfg = EnvConfig(game=("starpilot", "coinrun"), num_envs=4, split="all")
    a = _rollout(ProcgenVecEnv(cfg, seed=11), 200)
    b = _rollout(ProcgenVecEnv(cfg, seed=11), 200)
    c = _rollout(ProcgenVecEnv(cfg, seed=12), 200)
    for (oa, ra, la), (ob, rb, lb) in zip(a, b, strict=True):
        np.testing.assert_array_equal(oa, ob)
        np.testing.assert_array_equal(la, lb)
        if ra is not None:
            for x, y in zip(ra, rb, strict=True):
                np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0][2], c[0][2])  # another seed, other levels
    # reset() rebuilds from the seed: the same first frames again
    env = ProcgenVecEnv(cfg, seed=11)
    env.reset()
    env.step(np.zeros(4))
    np.testing.assert_array_equal(env.reset()[0], a[0][0])


def test_state_round_trip_continues_identically():
    cfg = EnvConfig(game=("coinrun", "bigfish"), num_envs=4)
    env = ProcgenVecEnv(cfg, seed=3)
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(50):
        env.step(rng.integers(0, 15, 4))
    state = env.get_state()
    actions = rng.integers(0, 15, (300, 4))
    first = [env.step(a) for a in actions]
    other = ProcgenVecEnv(cfg, seed=999)
    other.set_state(state)
    second = [other.step(a) for a in actions]
    for x, y in zip(first, second, strict=True):
        np.testing.assert_array_equal(x[0], y[0])
        np.testing.assert_array_equal(x[1], y[1])
        for k in ("done", "return", "length", "level_seed"):
            np.testing.assert_array_equal(x[4]["episode"][k], y[4]["episode"][k])


def test_one_slot_state_is_procgens_own_state_of_that_slot():
    """slot_state(i) (one serialization, one reused buffer) against procgen's own get_state of every env,
    slot i being env i // G of game i mod G; slot_states() is the same list."""
    cfg = EnvConfig(game=("coinrun", "maze"), num_envs=6)
    env = ProcgenVecEnv(cfg, seed=2)
    env.reset()
    rng = np.random.default_rng(1)
    for _ in range(30):
        env.step(rng.integers(0, 15, 6))
    own = env.get_state()["procgen"]
    expected = [own[slot % 2][slot // 2] for slot in range(6)]
    assert [env.slot_state(slot) for slot in range(6)] == expected
    assert env.slot_states() == expected
    assert len(set(expected)) == 6


def test_one_slot_starts_a_chosen_level_and_plays_it_like_a_fresh_env():
    """set_slot_state on one slot of a multi-task env: that slot shows and plays the snapshot's level
    exactly as the env the snapshot came from, the other slots go on untouched."""
    cfg = EnvConfig(game=("coinrun", "bigfish"), num_envs=4, split="1000:200")
    alone = ProcgenVecEnv(EnvConfig(game=("bigfish",), num_envs=1), seed=5, split="1234:1")
    alone.reset()
    snapshot = alone.get_state()["procgen"][0][0]
    env = ProcgenVecEnv(cfg, seed=3)
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(7):
        env.step(rng.integers(0, 15, 4))
    before = env.observe().copy()
    env.set_slot_state(3, snapshot)  # slot 3 plays game 3 mod 2 = bigfish
    after = env.observe()
    np.testing.assert_array_equal(after[:3], before[:3])
    np.testing.assert_array_equal(after[3], alone.observe()[0])
    actions = rng.integers(0, 15, (120, 4))
    for a in actions:
        obs, reward, *_, info = env.step(a)
        ref, ref_reward, *_, ref_info = alone.step(a[3:])
        np.testing.assert_array_equal(obs[3], ref[0])
        assert reward[3] == ref_reward[0] and info["level_seed"][3] == ref_info["level_seed"][0] == 1234
        assert info["episode"]["length"][3] == ref_info["episode"]["length"][0]


def test_human_view():
    env = ProcgenVecEnv(EnvConfig(num_envs=2), seed=0, render_human=True)
    _, info = env.reset()
    assert info["human"].shape == (2, 512, 512, 3)
    _, _, _, _, info = env.step(np.zeros(2))
    assert info["human"].std() > 0


def test_import_prints_no_gym_banner():
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import proclab.envs; proclab.envs.ProcgenVecEnv(proclab.envs.EnvConfig(num_envs=1)).reset()",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stderr == "", proc.stderr
    proc = subprocess.run(
        [sys.executable, "-c", "import warnings; import proclab.envs; warnings.warn('user-visible')"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "user-visible" in proc.stderr  # other warnings still show
