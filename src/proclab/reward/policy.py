"""``proclab trex train-policy``: PPO on a learned reward instead of the game's.

The PPO run of ``proclab train`` (same flags, presets, run directory, checkpoints and resume;
``--preset trex-policy``, the seed's settings, unless another is given) with one change: the
training env's reward becomes r̂(obs_t) from a ``trex train`` reward model
(:class:`~proclab.reward.wrapper.LearnedRewardEnv`), optionally squashed by a sigmoid (T-REX
Atari's choice), then normalised as usual. ``charts/episodic_return`` stays the **true** return
of the training episodes (the seed's ``eprewmean``, its evaluation curve) and
``charts/proxy_episodic_return`` is their learned-reward return. The validation env, if any,
plays for the true reward. The reward model and ``--sigmoid`` are fields of the run's config
(:class:`PolicyConfig`, saved in ``config.json``), so ``--resume`` uses them again. The trained
agent is an ordinary checkpoint: test it with ``proclab eval`` and watch it with ``proclab render``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import tyro

from proclab.envs import EpisodeLog
from proclab.errors import ProclabError
from proclab.io.configs import from_dict
from proclab.reward.nets import load_reward_model
from proclab.reward.wrapper import LearnedRewardEnv
from proclab.rl.config import ALGOS, ImpalaConfig, TrainConfig, algo_flags, preset
from proclab.rl.ppo_train import Trainer, run_ppo
from proclab.run.args import RunArgs

PRESET = "trex-policy"  # default settings: procedural-generalization's train_policy.py


@dataclass(frozen=True)
class PolicyConfig(TrainConfig):
    """A PPO run on a learned reward: ``proclab train``'s settings plus where the reward comes from."""

    reward_model: Path | None = None
    """Reward model: a 'proclab trex train' run directory or its checkpoint (required)."""
    sigmoid: bool = False
    """Squash the learned reward through a sigmoid before normalisation."""

    def validate(self, world: int = 1) -> None:
        if self.algo != "ppo":
            raise ProclabError(f"trex train-policy trains with PPO; --algo {self.algo} is not supported here")
        if self.reward_model is None:
            raise ProclabError(
                "give the learned reward with --reward-model RM (a 'proclab trex train' run directory)"
            )
        super().validate(world)


class LearnedRewardTrainer(Trainer):
    """The PPO trainer with the training env's reward replaced by a reward model's."""

    def __init__(self, config: PolicyConfig, **kw):
        config.validate()
        self.reward_net, ckpt = load_reward_model(config.reward_model)
        games = config.env.games()
        if games != (ckpt.meta.get("game"),):
            raise ProclabError(
                f"reward model {str(ckpt.path)!r} was learned on {ckpt.meta.get('game')}; "
                f"this run plays {', '.join(games)}"
            )
        self.proxy_log = EpisodeLog(games, config.env.mode)
        super().__init__(config, **kw)

    def wrap_env(self, env):
        return LearnedRewardEnv(env, self.rt.prepare(self.reward_net), self.rt, self.config.sigmoid)

    def on_train_info(self, info: dict) -> None:
        super().on_train_info(info)
        self.proxy_log.add({"episode": info["proxy_episode"]}, self.env.game_index)

    def extra_metrics(self) -> dict[str, float]:
        proxy = self.proxy_log.summary().get("return_mean")
        return {} if proxy is None else {"charts/proxy_episodic_return": proxy}


# -- command line ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _PolicyArgs(PolicyConfig):
    impala: tyro.conf.Suppress[ImpalaConfig] = field(default_factory=ImpalaConfig)
    algo: tyro.conf.Suppress[str] = "ppo"


DESCRIPTION = """PPO with a learned (T-REX) reward in place of the game's: 'proclab train''s options plus
--reward-model and --sigmoid, starting from --preset trex-policy (the seed's PPO settings, reward
normaliser discount 0.99); charts/episodic_return is the true return, charts/proxy_episodic_return
the learned one.

--preset NAME      start from a named setting (flags below override it)
--resume RUN_DIR   continue a stopped run exactly, with its reward model (only --total-steps may change;
                   a finished run is left as it is unless --total-steps asks for more); --time-limit
                   SECONDS bounds this session alone"""


def _start(chosen: dict[str, str | None], rest: list[str]) -> PolicyConfig:
    base = preset(chosen["--preset"] or PRESET)
    return PolicyConfig(**{**vars(base), "name": "trex"})


def _saved(data: dict, run_dir: Path) -> PolicyConfig:
    config = from_dict(PolicyConfig, data)
    if config.reward_model is None:
        raise ProclabError(
            f"{str(run_dir)!r} has no reward_model in its config.json: not a 'trex train-policy' run, "
            "or one written before its reward settings were config fields (start a new run)"
        )
    return config


def parse_args(argv: list[str], prog: str = "proclab trex train-policy") -> tuple[PolicyConfig, Path | None]:
    """``proclab train``'s command line over :class:`PolicyConfig` (every algo parses PPO's flags;
    :meth:`PolicyConfig.validate` refuses all but PPO)."""
    return RunArgs(
        prog=prog,
        flags=algo_flags(dict.fromkeys(ALGOS, _PolicyArgs), PolicyConfig),
        start=_start,
        saved=_saved,
        session_flags=("--time-limit",),
        end_step=TrainConfig.end_step,
        description=DESCRIPTION,
    ).parse(argv)


def _report(trainer: LearnedRewardTrainer, out: Path) -> None:
    true = trainer.train_log.summary().get("return_mean", float("nan"))
    proxy = trainer.proxy_log.summary().get("return_mean", float("nan"))
    print(
        f"trained {trainer.global_step:,} steps on the learned reward; recent true return {true:.2f}, "
        f"learned-reward return {proxy:.2f}"
    )
    print(f"run directory: {out}")


def main(argv: list[str], prog: str = "proclab trex train-policy") -> None:
    config, resume_dir = parse_args(argv, prog)
    config.validate()
    if resume_dir is None:  # the run's config.json names the model wherever it is run from
        config = replace(config, reward_model=config.reward_model.resolve())
    run_ppo(LearnedRewardTrainer, config, resume_dir, _report)
