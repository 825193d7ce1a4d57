"""``proclab train``: PPO or IMPALA on the game's reward, or PPO on a learned reward (``--reward-model``).

It parses ``--preset`` / ``--algo`` / flags / ``--resume`` (:class:`~proclab.run.parser.RunParser`), joins
torchrun when launched by it, and runs :class:`~proclab.rl.ppo_train.Trainer` or
:class:`~proclab.rl.impala_train.ImpalaTrainer`; both write the same run directories. A run on a learned
reward parses the same command line over :class:`~proclab.reward.policy.PolicyConfig`, which adds
``--reward-model`` and ``--sigmoid`` and starts from ``--preset trex-policy``, and trains with
:class:`~proclab.reward.policy.LearnedRewardTrainer`; ``--resume`` of such a run reads its reward model back
from its ``config.json``. This is the command module of the top layer because it joins ``rl`` and
``reward``, a layer above it (``rl`` may not import ``reward``).

Several processes: ``torchrun --nproc_per_node N -m proclab train ...`` (PPO only).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import tyro

from proclab.envs.rules import with_rule
from proclab.errors import ProclabError
from proclab.io.configs import from_dict
from proclab.io.run_dirs import read_run_config
from proclab.reward.policy import PolicyConfig, saved_config, start_config, train_on_learned_reward
from proclab.rl.config import ALGOS, PRESETS, ImpalaConfig, PPOConfig, TrainConfig, algo_flags, preset
from proclab.rl.impala_train import ImpalaTrainer
from proclab.rl.ppo_train import Trainer, run_ppo
from proclab.run.parser import RunParser


# -- command line ------------------------------------------------------------------------------
# One flag set per algorithm: the other algorithm's settings are hidden (their names overlap,
# e.g. --total-steps, --learning-rate, --gamma), and are kept at their defaults.
@dataclass(frozen=True)
class _PPOArgs(TrainConfig):
    impala: tyro.conf.Suppress[ImpalaConfig] = field(default_factory=ImpalaConfig)


@dataclass(frozen=True)
class _ImpalaArgs(TrainConfig):
    ppo: tyro.conf.Suppress[PPOConfig] = field(default_factory=PPOConfig)


DESCRIPTION = """Train an agent on Procgen with PPO (default) or IMPALA (--algo impala, or an impala-* preset;
'proclab train --algo impala --help' lists IMPALA's options; --algo impala alone starts from impala-procgen).

--preset NAME   start from a named setting: {presets} (flags below override it)
--resume RUN_DIR   continue a stopped run from its last checkpoint (PPO: exactly; IMPALA: weights,
                   optimiser, learning-rate schedule and counters, with fresh actors); a finished
                   run is left as it is unless --total-steps asks for more (recorded in the run's
                   config_history.jsonl); --time-limit SECONDS bounds this session alone"""


def _start(chosen: dict[str, str | None], rest: list[str]) -> TrainConfig:
    name, algo = chosen["--preset"], chosen["--algo"]
    if name:
        base = preset(name)
    else:  # --algo impala alone starts from the seed's single-game setting
        base = preset("impala-procgen") if algo == "impala" else TrainConfig()
    return base if algo is None else replace(base, algo=algo)


def run_parser(prog: str = "proclab train", more_help: str = "") -> RunParser[TrainConfig]:
    """``--preset NAME`` picks the defaults, other flags override fields; ``--resume RUN_DIR`` continues;
    ``more_help`` is added to the help's description."""
    return RunParser(
        prog=prog,
        flags=algo_flags({"ppo": _PPOArgs, "impala": _ImpalaArgs}),
        start=_start,
        choosers=("--preset", "--algo"),
        saved=lambda data, run_dir: from_dict(TrainConfig, data),
        may_change="--total-steps",
        session_flags=("--time-limit",),
        end_step=TrainConfig.end_step,
        description=DESCRIPTION.format(presets=", ".join(PRESETS)) + more_help,
    )


def parse_args(
    argv: list[str], prog: str = "proclab train", more_help: str = ""
) -> tuple[TrainConfig, Path | None]:
    """The config of a run and the run directory to resume, if any (see :func:`run_parser`); a new run's level
    rule is saved with every parameter spelled out, so that it does not depend on later defaults."""
    config, resume = run_parser(prog, more_help).parse(argv)
    if resume is None and config.env.level_rule:
        config = dataclasses.replace(config, env=with_rule(config.env, config.env.level_rule))
    return config, resume


def _report(trainer, out: Path) -> None:
    ret = trainer.train_log.summary().get("return_mean", float("nan"))
    print(f"trained {trainer.global_step:,} steps; recent train return {ret:.2f}")
    print(f"run directory: {out}")


def train(config: TrainConfig, resume_dir: Path | None) -> None:
    """Train (or resume) with ``config``'s algorithm in this process, or as one rank of a torchrun job."""
    if config.algo == "impala":
        if "LOCAL_RANK" in os.environ:
            raise ProclabError(
                "IMPALA scales with actors (--num-actors, --ray-address), not torchrun; "
                "run it as a single process: proclab train --algo impala ..."
            )
        trainer = ImpalaTrainer(config, run_dir=resume_dir, resume=resume_dir is not None)
        _report(trainer, trainer.train())
        return
    run_ppo(Trainer, config, resume_dir, _report)


# -- on a learned reward ----------------------------------------------------------------------
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
        run_parser(prog),
        flags=algo_flags(dict.fromkeys(ALGOS, _LearnedRewardArgs), PolicyConfig),
        start=start_config,
        saved=saved_config,
        description=LEARNED_DESCRIPTION,
    ).parse(argv)


def train_command(argv: list[str], prog: str = "proclab train") -> None:
    if learned_reward(argv):
        train_on_learned_reward(*parse_learned_reward(argv, prog))
        return
    if "--sigmoid" in argv:
        raise ProclabError("--sigmoid squashes a learned reward; give --reward-model REWARD_MODEL too")
    train(*parse_args(argv, prog, LEARNED_REWARD_HELP))
