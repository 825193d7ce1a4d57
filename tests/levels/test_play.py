"""--levels-from: every episode starts from the file's states, in the documented order, and plays as the
original level would (same frames, same rewards), drawn with the playing env's options."""

from dataclasses import replace

import numpy as np

from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.levels.file import level_states
from proclab.levels.level import generate_level
from proclab.levels.play import LevelsEnv

CONFIG = EnvConfig(game=("coinrun",), num_threads=1)


def test_episode_k_of_slot_i_plays_state_i_plus_k_n_in_turn(coin_on_agent):
    """Three slots, four one-step levels (the coin surrounds the agent): step k restarts slot i from state (i + 3(k+1)) mod 4."""
    seeds = [s.level_seed for s in coin_on_agent.states]
    with LevelsEnv(ProcgenVecEnv(replace(CONFIG, num_envs=3), seed=1), coin_on_agent) as env:
        _, info = env.reset()
        assert info["level_seed"].tolist() == seeds[:3]
        for k in range(5):
            _, reward, terminated, truncated, info = env.step(np.zeros(3, np.int32))
            assert (reward >= 10).all() and terminated.all() and not truncated.any()
            assert info["episode"]["level_seed"].tolist() == [seeds[(i + 3 * k) % 4] for i in range(3)]
            assert info["level_seed"].tolist() == [seeds[(i + 3 * (k + 1)) % 4] for i in range(3)]


def _play(env, actions) -> tuple[list, list]:
    frames, rewards = [env.reset()[0][0].copy()], []
    for a in actions:
        obs, reward, *_ = env.step(np.array([a], np.int32))
        frames.append(obs[0].copy())
        rewards.append(float(reward[0]))
    return frames, rewards


def test_a_saved_level_plays_exactly_as_the_original_one():
    """The same random actions on level 5 itself and on its saved first state: identical frames and rewards."""
    actions = np.random.default_rng(0).integers(0, 15, 120)
    saved = level_states("coinrun", "easy", [generate_level("coinrun", "easy", 5)])
    with ProcgenVecEnv(replace(CONFIG, num_envs=1, split="5:1")) as plain:
        expected = _play(plain, actions)
    with LevelsEnv(ProcgenVecEnv(replace(CONFIG, num_envs=1, split="900:1")), saved) as env:
        got = _play(env, actions)
    assert all((a == b).all() for a, b in zip(expected[0], got[0], strict=True))
    assert expected[1] == got[1]


def test_the_playing_envs_drawing_options_replace_the_files():
    """A level saved with backgrounds (procgen's default) is drawn without them in an env without them,
    exactly as that env draws the level itself."""
    saved = level_states("coinrun", "easy", [generate_level("coinrun", "easy", 7)])
    bare = replace(CONFIG, num_envs=1, use_backgrounds=False)
    with ProcgenVecEnv(replace(bare, split="7:1")) as plain:
        own = plain.reset()[0]
    with LevelsEnv(ProcgenVecEnv(replace(bare, split="900:1")), saved) as env:
        got = env.reset()[0]
    with LevelsEnv(ProcgenVecEnv(replace(CONFIG, num_envs=1, split="900:1")), saved) as env:
        with_backgrounds = env.reset()[0]
    assert (got == own).all() and not (with_backgrounds == own).all()
