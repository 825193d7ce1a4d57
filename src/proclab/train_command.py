"""``proclab train``: PPO or IMPALA on the game's reward, or PPO on a learned reward (``--reward-model``).

Both parse :mod:`proclab.rl.train`'s command line (``--preset``, ``--algo``, flags, ``--resume``); a run on a
learned reward parses it over :class:`~proclab.reward.policy.PolicyConfig`, which adds ``--reward-model``
and ``--sigmoid`` and starts from ``--preset trex-policy``, and trains with
:class:`~proclab.reward.policy.LearnedRewardTrainer`. ``--resume`` of such a run reads its reward model back
from its ``config.json``. This module sits above every layer because ``rl`` may not import ``reward``
(the reward layer is above it).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from pathlib import Path

import tyro

from proclab.errors import ProclabError
from proclab.io.run_dirs import read_run_config
from proclab.reward.policy import PolicyConfig, saved_config, start_config, train_on_learned_reward
from proclab.rl import train as rl_train
from proclab.rl.config import ALGOS, ImpalaConfig, algo_flags

LEARNED_REWARD_HELP = """
--reward-model REWARD_MODEL
                   train PPO on this learned reward (a 'proclab trex train' run or checkpoint directory)
                   instead of the game's, starting from --preset trex-policy unless another is given;
                   or 'per-step' for +1 every step (the control a survival-shaped learned reward is
                   compared with); charts/episodic_return stays the true return,
                   charts/proxy_episodic_return is the learned one; --resume reads the reward model back
                   from the run's config.json
--sigmoid          with --reward-model: squash the learned reward through a sigmoid before normalisation"""

LEARNED_DESCRIPTION = """PPO with a learned (T-REX) reward in place of the game's: 'proclab train''s options plus
--reward-model and --sigmoid, starting from --preset trex-policy (the seed's PPO settings, reward
normaliser discount 0.99); charts/episodic_return is the true return, charts/proxy_episodic_return
the learned one.

--preset NAME      start from a named setting (flags below override it)
--resume RUN_DIR   continue a stopped run exactly, with its reward model (only --total-steps may change;
                   a finished run is left as it is unless --total-steps asks for more); --time-limit
                   SECONDS bounds this session alone"""


@dataclass(frozen=True)
class _LearnedRewardArgs(PolicyConfig):
    """PPO's flags and the learned reward's (IMPALA's settings hidden: a learned reward trains PPO only)."""

    impala: tyro.conf.Suppress[ImpalaConfig] = field(default_factory=ImpalaConfig)
    algo: tyro.conf.Suppress[str] = "ppo"


def learned_reward(argv: list[str]) -> bool:
    """Whether ``argv`` trains on a learned reward: ``--reward-model`` is given, or ``--resume`` names a run
    whose ``config.json`` has one."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--reward-model", default=None)
    pre.add_argument("--resume", type=Path, default=None)
    known, _ = pre.parse_known_args(argv)
    if known.reward_model is not None:
        return True
    return known.resume is not None and read_run_config(known.resume).get("reward_model") is not None


def parse_learned_reward(argv: list[str], prog: str = "proclab train") -> tuple[PolicyConfig, Path | None]:
    """``proclab train``'s command line over :class:`PolicyConfig` (every algo parses PPO's flags;
    :meth:`PolicyConfig.validate` refuses all but PPO)."""
    return replace(
        rl_train.run_args(prog),
        flags=algo_flags(dict.fromkeys(ALGOS, _LearnedRewardArgs), PolicyConfig),
        start=start_config,
        saved=saved_config,
        description=LEARNED_DESCRIPTION,
    ).parse(argv)


def main(argv: list[str], prog: str = "proclab train") -> None:
    if learned_reward(argv):
        train_on_learned_reward(*parse_learned_reward(argv, prog))
        return
    if "--sigmoid" in argv:
        raise ProclabError("--sigmoid squashes a learned reward; give --reward-model REWARD_MODEL too")
    rl_train.train(*rl_train.parse_args(argv, prog, LEARNED_REWARD_HELP))
