"""Procgen environments: games and modes, level splits, vector envs, reward normalisation, scores."""

from proclab.envs.actions import ACTION_NAMES, ACTIONS, NOOP, NUM_ACTIONS
from proclab.envs.episodes import EpisodeLog
from proclab.envs.games import EPISODE_TIME_LIMIT, GAME_LISTS, GAMES, MODES, check_game, resolve_games
from proclab.envs.levels import (
    HELD_OUT,
    NAMED_SPLITS,
    LevelSplit,
    agent_split,
    check_disjoint,
    check_split_name,
    distinct_levels,
    held_out_split,
    parse_split,
)
from proclab.envs.normalize import RewardNormalizer, RunningMeanStd
from proclab.envs.scores import mean_normalized_score, normalized_score, score_bounds, score_table
from proclab.envs.vec_env import OBS_SHAPE, EnvConfig, ProcgenVecEnv

__all__ = [
    "ACTIONS",
    "ACTION_NAMES",
    "EPISODE_TIME_LIMIT",
    "GAMES",
    "GAME_LISTS",
    "HELD_OUT",
    "MODES",
    "NAMED_SPLITS",
    "NOOP",
    "NUM_ACTIONS",
    "OBS_SHAPE",
    "EnvConfig",
    "EpisodeLog",
    "LevelSplit",
    "ProcgenVecEnv",
    "RewardNormalizer",
    "RunningMeanStd",
    "agent_split",
    "check_disjoint",
    "check_game",
    "check_split_name",
    "distinct_levels",
    "held_out_split",
    "mean_normalized_score",
    "normalized_score",
    "parse_split",
    "resolve_games",
    "score_bounds",
    "score_table",
]
