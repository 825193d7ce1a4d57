"""Every (game, mode) pair: valid ones build and step, invalid ones fail before reaching procgen."""

import numpy as np
import pytest

from proclab.envs import GAMES, MODES, EnvConfig, ProcgenVecEnv, check_game, resolve_games
from proclab.envs.games import games_for_mode
from proclab.errors import ProclabError

VALID = [(g, m) for m in MODES for g in games_for_mode(m)]
INVALID = [(g, m) for m in MODES for g in GAMES if g not in games_for_mode(m)]


def test_mode_tables_cover_what_procgen_documents():
    assert len(GAMES) == 16
    assert set(games_for_mode("easy")) == set(GAMES) == set(games_for_mode("hard"))
    assert len(VALID) == 16 + 16 + 4 + 6 + 8


@pytest.mark.parametrize(("game", "mode"), VALID)
def test_valid_game_mode_steps(game, mode):
    env = ProcgenVecEnv(EnvConfig(game=(game,), mode=mode, num_envs=2, num_threads=0), seed=0)
    obs, info = env.reset()
    assert obs.shape == (2, 3, 64, 64) and obs.dtype == np.uint8
    for _ in range(3):
        obs, rew, term, trunc, info = env.step(np.array([7, 4]))
    assert rew.shape == (2,) and rew.dtype == np.float32
    assert term.dtype == bool and trunc.dtype == bool
    assert info["level_seed"].shape == (2,)
    assert obs.std() > 0  # a real rendered frame, not a blank buffer
    env.close()


@pytest.mark.parametrize(("game", "mode"), INVALID)
def test_invalid_game_mode_is_one_line_error(game, mode):
    with pytest.raises(ProclabError, match=rf"game '{game}' has no '{mode}' mode") as err:
        ProcgenVecEnv(EnvConfig(game=(game,), mode=mode, num_envs=2), seed=0)
    assert "\n" not in str(err.value)


def test_unknown_game_suggests_closest():
    with pytest.raises(ProclabError, match="Did you mean 'coinrun'"):
        check_game("coinrn")
    with pytest.raises(ProclabError, match=r"unknown distribution mode 'hardd'.*Did you mean 'hard'"):
        resolve_games("coinrun", "hardd")


def test_resolve_games_lists_and_commas():
    assert resolve_games("easy6") == ("bigfish", "fruitbot", "maze", "leaper", "plunder", "starpilot")
    assert resolve_games(["memory4"], "memory") == ("dodgeball", "heist", "maze", "miner")
    assert resolve_games("coinrun, starpilot") == ("coinrun", "starpilot")
    with pytest.raises(ProclabError, match="repeats maze"):
        resolve_games(["maze", "maze"])
    with pytest.raises(ProclabError, match="no game given"):
        resolve_games([""])
    with pytest.raises(ProclabError, match="has no 'memory' mode"):
        resolve_games("easy6", "memory")  # bigfish has no memory mode


def test_num_envs_errors():
    with pytest.raises(ProclabError, match="num_envs=0 is invalid"):
        ProcgenVecEnv(EnvConfig(num_envs=0))
    with pytest.raises(ProclabError, match="smaller than the 6 games"):
        ProcgenVecEnv(EnvConfig(game=("easy6",), num_envs=4))


def test_options_are_passed_through():
    """Backgrounds off makes CoinRun frames darker; velocity painting changes pixels."""
    frames = {}
    for bg in (True, False):
        env = ProcgenVecEnv(EnvConfig(game=("coinrun",), num_envs=4, use_backgrounds=bg), seed=3)
        frames[bg] = env.reset()[0].astype(float)
        env.close()
    assert frames[False].mean() < frames[True].mean()
    base = ProcgenVecEnv(EnvConfig(game=("starpilot",), num_envs=2), seed=1)
    vel = ProcgenVecEnv(EnvConfig(game=("starpilot",), num_envs=2, paint_vel_info=True), seed=1)
    base.reset(), vel.reset()
    o1, o2 = base.step(np.array([7, 7]))[0], vel.step(np.array([7, 7]))[0]
    assert (o1 != o2).any()
    seq = ProcgenVecEnv(EnvConfig(game=("coinrun",), num_envs=2, use_sequential_levels=True), seed=1)
    assert seq._procgen_options()["use_sequential_levels"] is True
