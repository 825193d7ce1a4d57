"""``proclab trex train-policy``: PPO on a learned reward instead of the game's.

The PPO run of ``proclab train`` (same flags, presets, run directory, checkpoints and resume;
``--preset trex-policy``, the seed's settings, unless another is given) with one change: the training env's reward becomes r̂(obs_t) from a ``trex train`` reward model
(:class:`~proclab.reward.wrapper.LearnedRewardEnv`), optionally squashed by a sigmoid (T-REX
Atari's choice), then normalised as usual. ``charts/episodic_return`` stays the **true** return
of the training episodes (the seed's ``eprewmean``, its evaluation curve) and
``charts/proxy_episodic_return`` is their learned-reward return. The validation env, if any,
plays for the true reward. The trained agent is an ordinary checkpoint: test it with
``proclab eval`` and watch it with ``proclab render``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from proclab.config import TrainConfig
from proclab.envs import EpisodeLog
from proclab.errors import ProclabError
from proclab.reward.nets import load_reward_model
from proclab.reward.wrapper import LearnedRewardEnv
from proclab.rl import train as ppo_train

PRESET = "trex-policy"  # default settings: procedural-generalization's train_policy.py
SETTINGS = "trex_reward.json"  # in the run directory: which reward model, so that --resume uses it again
HELP = """\
proclab trex train-policy: PPO with a learned (T-REX) reward in place of the game's.

  --reward-model RM   reward model: a 'proclab trex train' run directory or its checkpoint (required)
  --sigmoid           squash the learned reward through a sigmoid before normalisation

Every other option is 'proclab train''s (below), starting from --preset trex-policy (the seed's
PPO settings, reward normaliser discount 0.99); charts/episodic_return is the true return,
charts/proxy_episodic_return the learned one.
"""


class LearnedRewardTrainer(ppo_train.Trainer):
    """The PPO trainer with the training env's reward replaced by a reward model's."""

    def __init__(self, config: TrainConfig, reward_model: Path, sigmoid: bool = False, **kw):
        self.reward_net, ckpt = load_reward_model(reward_model)
        games = config.env.games()
        if games != (ckpt.meta.get("game"),):
            raise ProclabError(
                f"reward model {str(ckpt.path)!r} was learned on {ckpt.meta.get('game')}; "
                f"this run plays {', '.join(games)}"
            )
        self.sigmoid = sigmoid
        self.proxy_log = EpisodeLog(games, config.env.mode)
        super().__init__(config, **kw)

    def wrap_env(self, env):
        return LearnedRewardEnv(env, self.rt.prepare(self.reward_net), self.rt, self.sigmoid)

    def _on_train_info(self, info: dict) -> None:
        super()._on_train_info(info)
        self.proxy_log.add({"episode": info["proxy_episode"]}, self.env.game_index)

    def extra_metrics(self) -> dict[str, float]:
        proxy = self.proxy_log.summary().get("return_mean")
        return {} if proxy is None else {"charts/proxy_episodic_return": proxy}


def main(argv: list[str], prog: str = "proclab trex train-policy") -> None:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--reward-model", type=Path, default=None)
    pre.add_argument("--sigmoid", action="store_true")
    known, rest = pre.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        print(HELP)
    if not any(a.split("=")[0] in ("--preset", "--resume") for a in rest):
        rest = ["--preset", PRESET, *rest]  # the seed's train_policy.py settings
    config, resume_dir = ppo_train.parse_args(rest, prog)
    if resume_dir is not None:
        if known.reward_model is not None or known.sigmoid:
            raise ProclabError("--resume reuses the run's reward model and --sigmoid; drop those flags")
        try:
            saved = json.loads((resume_dir / SETTINGS).read_text())
        except (OSError, ValueError):
            raise ProclabError(
                f"{str(resume_dir)!r} is not a 'trex train-policy' run (no readable {SETTINGS})"
            ) from None
        reward_model, sigmoid = Path(saved["reward_model"]), bool(saved["sigmoid"])
    elif known.reward_model is None:
        raise ProclabError(
            "give the learned reward with --reward-model RM (a 'proclab trex train' run directory)"
        )
    else:
        reward_model, sigmoid = known.reward_model, known.sigmoid
        if not any(a == "--name" or a.startswith("--name=") for a in rest):
            config = replace(config, name="trex")
    if config.algo != "ppo":
        raise ProclabError(f"trex train-policy trains with PPO; --algo {config.algo} is not supported here")
    trainer = LearnedRewardTrainer(
        config, reward_model, sigmoid, run_dir=resume_dir, resume=resume_dir is not None
    )
    if resume_dir is None:
        settings = {"reward_model": str(reward_model.resolve()), "sigmoid": sigmoid}
        (trainer.run_dir / SETTINGS).write_text(json.dumps(settings, indent=2))
    out = trainer.train()
    summary = trainer.train_log.summary()
    print(f"trained {trainer.global_step:,} steps on the learned reward; recent true return "
          f"{summary.get('return_mean', float('nan')):.2f}, learned-reward return "
          f"{trainer.proxy_log.summary().get('return_mean', float('nan')):.2f}")  # fmt: skip
    print(f"run directory: {out}")
