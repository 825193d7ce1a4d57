"""``proclab train``'s command line for both algorithms (PPO by default, ``--algo impala``).

It parses ``--preset`` / ``--algo`` / flags / ``--resume`` (:class:`~proclab.run.args.RunArgs`),
joins torchrun when launched by it, and runs :class:`~proclab.rl.ppo_train.Trainer` or
:class:`~proclab.rl.impala_train.ImpalaTrainer`; both write the same run directories. The command
itself is :mod:`proclab.train_command`, above every layer: it also trains PPO on a learned reward
(``--reward-model``, :mod:`proclab.reward.policy`) with this parser, which ``rl`` may not import.

Several processes: ``torchrun --nproc_per_node N -m proclab train ...`` (PPO only).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import tyro

from proclab.envs.rules import with_rule
from proclab.errors import ProclabError
from proclab.io.configs import from_dict
from proclab.rl.config import PRESETS, ImpalaConfig, PPOConfig, TrainConfig, algo_flags, preset
from proclab.rl.impala_train import ImpalaTrainer
from proclab.rl.ppo_train import Trainer, run_ppo
from proclab.run.args import RunArgs


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


def run_args(prog: str = "proclab train", more_help: str = "") -> RunArgs[TrainConfig]:
    """``--preset NAME`` picks the defaults, other flags override fields; ``--resume RUN_DIR`` continues;
    ``more_help`` is added to the help's description."""
    return RunArgs(
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
    """The config of a run and the run directory to resume, if any (see :func:`run_args`); a new run's level
    rule is saved with every parameter spelled out, so that it does not depend on later defaults."""
    config, resume = run_args(prog, more_help).parse(argv)
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
