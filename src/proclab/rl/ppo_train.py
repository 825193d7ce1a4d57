"""The PPO training run: an actor fills rollouts, the PPO learner updates, metrics and checkpoints follow.

The loop is the same for every agent: an :class:`~proclab.rl.rollout.Actor` fills a rollout
from the training envs (a second actor steps a validation env on other levels with the same
policy), :class:`~proclab.rl.ppo.PPOLearner` updates the agent, a row of metrics is written,
and every ``checkpoint_every`` steps the full training state is saved. Resuming restores that
state (weights, optimiser, reward normaliser, RNGs, procgen's own game states, the actors'
carried observations and agent states) so the run continues exactly as if it had never stopped.

Before the actors and the learner are built, the run's layout on a CPU (learner pieces and
threads, acting slices: :mod:`proclab.rl.ppo_layout`) is given, cached or timed, printed, and
written into the config that ``config.json`` saves, so that a resumed run computes as it did. A
timed layout follows the load (``follow_load``): when the updates leave the pace they settled at
(:class:`~proclab.run.layout.PaceWatch`), the layout is timed again and the run goes on in the
fastest, with a line in ``config_history.jsonl``.

Several processes (torchrun): each rank gets ``num_envs / N`` envs (seeded per rank) and
averages gradients across ranks every step (:mod:`proclab.run.distributed`).

Checkpoints also carry the reward normalisation in their metadata
(``meta["reward_normalisation"]``: ``reward_norm = clip(reward / scale, -clip, clip)``), so
readers such as ``proclab record`` need not open the training state.

Subclasses change the training env (:meth:`Trainer.wrap_env`), see every step's episode
information (:meth:`Trainer.on_train_info`) and add metrics (:meth:`Trainer.extra_metrics`);
``proclab train --reward-model`` does so for a learned reward (:mod:`proclab.reward.policy`).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from proclab.envs import EpisodeLog, ProcgenVecEnv, RewardNormalizer
from proclab.envs.halves import HalvedVecEnv
from proclab.envs.rules import with_rule
from proclab.errors import ProclabError
from proclab.io.checkpoint import find_checkpoint
from proclab.io.configs import to_dict
from proclab.io.run_dirs import record_config_change
from proclab.models import build_agent
from proclab.models.loading import load
from proclab.models.planners import planner
from proclab.rl.agent_checkpoints import (
    load_agent_checkpoint,
    new_run_dir,
    recent_return,
    save_agent_checkpoint,
)
from proclab.rl.config import TrainConfig, preset
from proclab.rl.overlap import GroupedActor
from proclab.rl.ppo import PPOLearner
from proclab.rl.ppo_layout import ppo_layout, retime_layout
from proclab.rl.rollout import Actor, Rollout
from proclab.run.checkpoints import crossed
from proclab.run.distributed import (
    broadcast_parameters,
    check_replicas,
    deadline,
    gather_on_rank0,
    out_of_time,
    start_training,
    train_on_ranks,
)
from proclab.run.layout import CHOICES, PaceWatch
from proclab.run.log import RunLogger, StepBar, Throughput
from proclab.run.runtime import restore_rng_state, rng_state, torch_threads

if TYPE_CHECKING:
    from proclab.models.agent import Agent


class Trainer:
    """One training run (one process of it under torchrun)."""

    def __init__(self, config: TrainConfig, run_dir: Path | None = None, resume: bool = False):
        self.rank, self.world, self.rt = start_training(config)
        source = None if config.init_from is None or resume else load(config.init_from, device="cpu")
        if source is not None:  # fine-tuning: its architecture, which config.json then records
            config = replace(config, agent=source.config)
        self.config = cfg = config
        agent = build_agent(cfg.agent)
        if source is not None:
            agent.load_state_dict(source.state_dict())
        self.agent = self.rt.prepare(agent)
        broadcast_parameters(self.agent)
        torch.manual_seed(cfg.seed + 1000 * self.rank)  # per-rank action sampling and shuffling

        self.n_local = n_local = cfg.env.num_envs // self.world
        self.layout = ppo_layout(cfg, self.rt, self.agent, n_local)
        self.rt = self.layout.layout.apply(self.rt, torch.get_num_threads())
        timed = cfg.learner_layout in CHOICES or resume  # a resumed run's recorded layout was its own
        follow = cfg.follow_load and timed and self.world == 1 and self.rt.device.type == "cpu"
        self.pace = PaceWatch() if follow else None
        # config.json records the layout, and whether it may change
        self.config = cfg = replace(cfg, learner_layout=str(self.layout.layout), follow_load=follow)
        if self.rank == 0:
            print(f"learner layout: {self.layout.layout} ({self.layout.how})", flush=True)
        gamma = cfg.ppo.reward_norm_gamma if cfg.ppo.reward_norm_gamma is not None else cfg.ppo.gamma
        vec_env = HalvedVecEnv if cfg.ppo.acting == "overlap" else ProcgenVecEnv
        env = self.wrap_env(
            vec_env(cfg.env, seed=cfg.seed * 1000 + self.rank, num_envs=n_local, reward_rule=cfg.reward_rule)
        )
        self.env = RewardNormalizer(env, gamma, cfg.ppo.reward_clip) if cfg.ppo.normalize_reward else env
        if cfg.ppo.acting == "eager":
            self.actor = Actor(self.env, self.agent, self.rt, side_by_side=True)
        else:
            self.actor = GroupedActor(self.env, self.agent, self.rt)
        self.val_actor = None
        if cfg.val_split is not None and cfg.val_num_envs > 0:
            val_env = ProcgenVecEnv(
                cfg.env,
                seed=cfg.seed * 1000 + 500 + self.rank,
                num_envs=cfg.val_num_envs,
                split=cfg.val_split,
                reward_rule=cfg.reward_rule,
            )
            self.val_actor = Actor(val_env, self.agent, self.rt, side_by_side=True)

        self.batch = cfg.env.num_envs * cfg.ppo.num_steps
        self.num_updates = cfg.ppo.total_steps // self.batch
        self.learner = PPOLearner(self.agent, cfg.ppo, self.rt, self.num_updates, self.batch)
        # kickstarting: the planner reads the training env's own game states (the actor's slots)
        self.teacher = None if cfg.ppo.teacher is None else planner(cfg.ppo.teacher, cfg.env.games()[0])
        self.rollout = Rollout.allocate(cfg.ppo.num_steps, n_local, self.rt.device)
        games = env.games
        self.train_log = EpisodeLog(games, cfg.env.mode)
        self.val_log = EpisodeLog(games, cfg.env.mode)
        self.global_step = 0
        self.wall_offset = 0.0
        self.throughput = Throughput()

        if run_dir is None and self.rank == 0:
            run_dir = new_run_dir(cfg)
        self.run_dir = run_dir
        resume_step = self._restore() if resume else None
        self.logger = None
        if self.rank == 0:
            self.logger = RunLogger(
                run_dir,
                to_dict(cfg),
                tensorboard=cfg.tensorboard,
                wandb_project=cfg.wandb_project,
                resume_step=resume_step,
            )

    # -- the loop ----------------------------------------------------------------------------
    def train(self, progress: bool = True) -> Path:
        cfg = self.config
        start_time = time.time() - self.wall_offset
        bar = StepBar(
            "train", self.num_updates * self.batch, self.global_step, enabled=progress and self.rank == 0
        )
        stop_at = deadline(cfg.time_limit)
        done = self.learner.updates >= self.num_updates  # a finished run trains no further
        while not done:
            t0 = time.time()
            with torch_threads(1) if self.rt.acting_workers > 1 else contextlib.nullcontext():
                # acting runs on the workers; this thread's sampling and copies are small operations
                self.actor.collect(self.rollout, on_info=self.on_train_info, teacher=self.teacher)
            metrics = self.learner.update(self.rollout)
            self.global_step += self.batch
            seconds = time.time() - t0
            self.throughput.add(seconds, self.batch)
            if self.pace is not None and self.pace.observe(seconds):
                self._follow_load()
            if self.rank == 0 and self.learner.updates % cfg.log_every == 0:
                row = {
                    "charts/SPS": self.throughput.sps(),
                    **self.train_log.charts(),
                    **self.val_log.charts("val_"),
                    **self.extra_metrics(),
                }
                self.logger.log(self.global_step, time.time() - start_time, {**row, **metrics})
            bar.update(self.global_step, recent_return(self.train_log))
            done = self.learner.updates >= self.num_updates or out_of_time(
                stop_at, self.world, self.rt.device
            )
            if crossed(self.global_step - self.batch, self.global_step, cfg.checkpoint_every) or done:
                self.save_checkpoint(time.time() - start_time)
        bar.close()
        if self.world > 1:
            check_replicas(self.agent)
        if self.logger is not None:
            self.logger.close()
        return self.run_dir

    def close(self) -> None:
        """Close the training and validation envs (and their threads); the run directory is complete already."""
        self.actor.close()
        if self.val_actor is not None:
            self.val_actor.close()

    def _follow_load(self) -> None:
        """The updates left their pace: time the layout again and go on in the fastest."""
        choice = retime_layout(self.config, self.rt, self.agent, self.n_local)
        old, new = self.config.learner_layout, str(choice.layout)
        print(f"the pace of updates changed: learner layout {new} ({choice.how}; was {old})", flush=True)
        if new == old:
            return
        self.rt = choice.layout.apply(self.rt, torch.get_num_threads())
        self.learner.rt = self.rt
        for actor in (self.actor, self.val_actor):
            if actor is not None:
                actor.use_runtime(self.rt)
        self.config = replace(self.config, learner_layout=new)
        if self.run_dir is not None:
            changed = {"learner_layout": [old, new]}
            record_config_change(
                self.run_dir, to_dict(self.config), changed, self.global_step, "retimed_at_step"
            )

    # -- hooks for subclasses (train --reward-model: a learned reward in place of the env's) ---------
    def wrap_env(self, env):
        """Wrap the training env below reward normalisation; the default keeps it as it is."""
        return env

    def extra_metrics(self) -> dict[str, float]:
        """More metrics for each logged row; none by default."""
        return {}

    def on_train_info(self, info: dict) -> None:
        """Every training step's env ``info`` (finished episodes under ``info["episode"]``); subclasses
        extend it to log more per-episode information (call the base method first)."""
        self.train_log.add(info, self.env.game_index)
        if self.val_actor is not None:  # one validation step per training step, same policy
            _, action, _, state = self.val_actor.act()
            _, _, val_info = self.val_actor.env_step(action, state)
            self.val_log.add(val_info, self.val_actor.env.game_index)

    # -- checkpoints ---------------------------------------------------------------------------
    def _carried(self, actor: Actor) -> dict:
        return {
            "env": actor.env.get_state(),
            "first": actor.first.cpu(),
            "prev_reward": actor.prev_reward.cpu(),
            "state": {k: v.cpu() for k, v in actor.state.items()},
        }

    def _local_train_state(self) -> dict:
        return {
            **rng_state(),
            "actor": self._carried(self.actor),
            "val_actor": self._carried(self.val_actor) if self.val_actor is not None else None,
            "train_log": self.train_log.state_dict(),
            "val_log": self.val_log.state_dict(),
        }

    def save_checkpoint(self, wall: float) -> Path | None:
        local = self._local_train_state()
        ranks = gather_on_rank0(local)
        if ranks is None:
            return None
        state = {
            "learner": self.learner.state_dict(),
            "global_step": self.global_step,
            "wall_time": wall,
            "ranks": ranks,
        }
        meta = {"reward_normalisation": self.reward_normalisation()}
        return save_agent_checkpoint(
            self.run_dir, self.agent, self.config, self.env.games, self.global_step, state, meta
        )

    def reward_normalisation(self) -> dict:
        """How this run transforms rewards (rank 0's statistics): ``reward_norm = clip(reward / scale, -clip, clip)``."""
        if not isinstance(self.env, RewardNormalizer):
            return {"scale": 1.0, "clip": None, "source": "training did not normalise rewards"}
        return {
            "scale": self.env.scale(),
            "clip": self.env.clip,
            "source": f"running return std of rank 0 at step {self.global_step}",
        }

    def _restore(self) -> int:
        state = load_agent_checkpoint(self.run_dir, self.agent)
        if len(state["ranks"]) != self.world:
            raise ProclabError(
                f"checkpoint {str(find_checkpoint(self.run_dir))!r} was written by {len(state['ranks'])} "
                "processes; resume it with as many"
            )
        self.learner.load_state_dict(state["learner"])
        self.global_step = int(state["global_step"])
        self.wall_offset = float(state["wall_time"])
        local = state["ranks"][self.rank]
        restore_rng_state(local)
        _restore_actor(self.actor, local["actor"], self.rt.device)
        if self.val_actor is not None and local["val_actor"] is not None:
            _restore_actor(self.val_actor, local["val_actor"], self.rt.device)
        self.train_log.load_state_dict(local["train_log"])
        self.val_log.load_state_dict(local["val_log"])
        return self.global_step


def _restore_actor(actor: Actor, carried: dict, device) -> None:
    obs, _ = actor.env.set_state(carried["env"])
    actor.obs = actor.rt.obs_tensor(obs)
    actor.first = carried["first"].to(device)
    actor.prev_reward = carried["prev_reward"].to(device)
    actor.state = {k: v.to(device) for k, v in carried["state"].items()}


def run_ppo(trainer_class: type[Trainer], config: TrainConfig, resume_dir: Path | None, report) -> None:
    """Run a PPO trainer in this process, or as one rank of a torchrun job (rank 0 reports)."""
    train_on_ranks(trainer_class, config, resume_dir, new_run_dir, report)


def preset_config(
    game: str,
    preset_name: str | TrainConfig,
    *,
    steps: int | None = None,
    seconds: float | None = None,
    seed: int = 0,
    runs: str | Path = "runs",
    name: str | None = None,
    level_rule: str | None = None,
    reward_rule: str = "",
    teacher: str | None = None,
    teacher_steps: int = 0,
    init_from: str | None = None,
    **runtime,
) -> TrainConfig:
    """The PPO run of preset ``preset_name`` (``proclab train --preset``; or a config of one's own to start from,
    so that a population can train a setting no preset names) on ``game``: ``steps`` environment
    steps (default: the preset's) or ``seconds`` of wall-clock time, in a run directory under ``runs``, on
    levels edited by ``level_rule`` (:mod:`proclab.envs.rules`; default none), paid by ``reward_rule``
    (:mod:`proclab.envs.rewards`; default the game's reward), kickstarted by the planner ``teacher``
    (:data:`~proclab.models.planners.PLANNERS`; its weight decays to 0 over ``teacher_steps``, 0: never),
    starting from the weights of ``init_from`` (``TrainConfig.init_from``; default a fresh agent), with the
    runtime fields given (``device``, ``precision``, ``channels_last``, ``torch_threads``)."""
    config = preset(preset_name) if isinstance(preset_name, str) else preset_name
    ppo = replace(config.ppo, total_steps=steps or config.ppo.total_steps)
    if teacher is not None:
        ppo = replace(ppo, teacher=teacher, teacher_steps=teacher_steps)
    return replace(
        config,
        env=with_rule(replace(config.env, game=(game,)), level_rule),
        ppo=ppo,
        run_root=Path(runs),
        seed=seed,
        name=name or (preset_name if isinstance(preset_name, str) else config.name),
        time_limit=seconds or 0,
        reward_rule=reward_rule,
        init_from=init_from,
        **runtime,
    )


def train(
    game: str = "coinrun",
    preset_name: str = "quickstart",
    *,
    steps: int | None = None,
    seconds: float | None = None,
    seed: int = 0,
    runs: str | Path = "runs",
    name: str | None = None,
    level_rule: str | None = None,
    reward_rule: str = "",
    teacher: str | None = None,
    teacher_steps: int = 0,
    init_from: str | None = None,
    device: str = "auto",
    precision: str = "auto",
) -> Agent:
    """Train a PPO agent (:func:`preset_config`) and return it, loaded (:func:`proclab.models.loading.load`;
    ``agent.source`` is the run directory). For a notebook: an agent to study in a minute
    (``train("coinrun", steps=10_240)``; ``seconds=`` caps the time instead, at the cost of an agent that
    depends on the machine's speed); ``teacher="coin-planner"`` kickstarts it (docs/ppo.md); ``init_from``
    fine-tunes a trained agent instead of a fresh one."""
    config = preset_config(
        game, preset_name, steps=steps, seconds=seconds, seed=seed, runs=runs, name=name, level_rule=level_rule,
        reward_rule=reward_rule, teacher=teacher, teacher_steps=teacher_steps, init_from=init_from, device=device,
        precision=precision,
    )  # fmt: skip
    run_dir = Trainer(config).train()
    # the activations as the agent computes them: fp32, whatever precision it trained in
    return load(run_dir, device=device)
