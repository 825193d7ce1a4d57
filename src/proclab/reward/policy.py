"""PPO on a learned reward instead of the game's: ``proclab train --reward-model REWARD_MODEL``.

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
``--reward-model per-step`` pays +1 for every step instead (:class:`~proclab.reward.wrapper.PerStepReward`):
the policy a reward that only says "survive" trains, beside which a learned reward's policy is read.
Its command line is ``proclab train``'s, in :mod:`proclab.command` (the top layer: it joins ``rl``, which may
not import ``reward``, and this module).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated

from proclab.envs import EpisodeLog
from proclab.errors import ProclabError
from proclab.io.arguments import REWARD_MODEL
from proclab.io.configs import from_dict
from proclab.reward.nets import load_reward_model
from proclab.reward.wrapper import LearnedRewardEnv, PerStepReward
from proclab.rl.config import TrainConfig, preset
from proclab.rl.ppo_train import Trainer, run_ppo

PRESET = "trex-policy"  # default settings: procedural-generalization's train_policy.py
PER_STEP = "per-step"
"""``--reward-model per-step``: +1 for every step, no reward model."""


def is_per_step(reward_model: Path | None) -> bool:
    """``--reward-model per-step`` (a run's config.json saves it as an absolute path: its name is kept), unless
    a reward model directory of that name exists."""
    return (
        reward_model is not None and Path(reward_model).name == PER_STEP and not Path(reward_model).exists()
    )


@dataclass(frozen=True)
class PolicyConfig(TrainConfig):
    """A PPO run on a learned reward: ``proclab train``'s settings plus where the reward comes from."""

    reward_model: Annotated[Path | None, REWARD_MODEL] = None
    """The learned reward: a 'proclab trex train' run or checkpoint directory (required), or per-step:
    +1 for every step (the +1/step baseline as a reward)."""
    sigmoid: bool = False
    """Squash the learned reward through a sigmoid before normalisation."""

    def validate(self, world: int = 1) -> None:
        if self.algo != "ppo":
            raise ProclabError(
                f"--reward-model trains with PPO; --algo {self.algo} takes the game's reward only"
            )
        if self.reward_model is None:
            raise ProclabError(
                "give the learned reward with --reward-model REWARD_MODEL (a 'proclab trex train' run directory)"
            )
        super().validate(world)


class LearnedRewardTrainer(Trainer):
    """The PPO trainer with the training env's reward replaced by a reward model's."""

    def __init__(self, config: PolicyConfig, **kw):
        config.validate()
        games = config.env.games()
        if is_per_step(config.reward_model):
            self.reward_net = PerStepReward()
        else:
            self.reward_net, ckpt = load_reward_model(config.reward_model)
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


def start_config(chosen: dict[str, str | None], rest: list[str]) -> PolicyConfig:
    """The defaults of a new run from ``--preset`` (default: trex-policy, the seed's) and ``--algo``, named
    ``trex`` (:class:`~proclab.run.parser.RunParser`' ``start``)."""
    base = preset(chosen["--preset"] or PRESET)
    if chosen.get("--algo") is not None:
        base = replace(base, algo=chosen["--algo"])
    return PolicyConfig(**{**vars(base), "name": "trex"})


def saved_config(data: dict, run_dir: Path) -> PolicyConfig:
    """The config of a run to resume, from its ``config.json`` (with its reward model)."""
    config = from_dict(PolicyConfig, data)
    if config.reward_model is None:
        raise ProclabError(
            f"{str(run_dir)!r} has no reward_model in its config.json: not a run on a learned reward, "
            "or one written before its reward settings were config fields (start a new run)"
        )
    return config


def _report(trainer: LearnedRewardTrainer, out: Path) -> None:
    true = trainer.train_log.summary().get("return_mean", float("nan"))
    proxy = trainer.proxy_log.summary().get("return_mean", float("nan"))
    print(
        f"trained {trainer.global_step:,} steps on the learned reward; recent true return {true:.2f}, "
        f"learned-reward return {proxy:.2f}"
    )
    print(f"run directory: {out}")


def train_on_learned_reward(config: PolicyConfig, resume_dir: Path | None) -> None:
    """Train (or resume) PPO on ``config``'s learned reward, in this process or as one rank of torchrun."""
    config.validate()
    if resume_dir is None and not is_per_step(
        config.reward_model
    ):  # config.json names the model from anywhere
        config = replace(config, reward_model=config.reward_model.resolve())
    run_ppo(LearnedRewardTrainer, config, resume_dir, _report)
