"""``proclab train --algo impala``: the learner's loop around actors, V-trace updates, validation and checkpoints.

The learner takes the next batch of unrolls from the actors (:mod:`proclab.rl.actors`, or
:mod:`proclab.rl.ray_actors` with ``--ray-address``), runs one update on the latest weights
(:class:`~proclab.rl.impala.ImpalaLearner`), publishes the new weights to the actors, and
writes a row of metrics (per-game returns from the actors' episodes, the policy lag, the
actor restarts, the losses). Validation is a separate actor on the ``val_split`` levels
that plays with the latest weights but is never trained on: it delivers at most one unroll
per update (``val_num_envs * unroll_length`` steps), and its last 10 episodes per game are
logged as ``charts/<game>/val_episodic_return``.

Checkpoints hold the weights, optimiser, learning-rate schedule, update and step counters and
the episode logs. ``--resume`` continues from them with fresh actors: actors are asynchronous,
so a resumed run is not bit-identical to an uninterrupted one (PPO's resume is).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from proclab.envs import EpisodeLog
from proclab.io.configs import to_dict
from proclab.models import build_agent
from proclab.rl.agent_checkpoints import (
    load_agent_checkpoint,
    new_run_dir,
    recent_return,
    save_agent_checkpoint,
)
from proclab.rl.config import TrainConfig
from proclab.rl.impala import ImpalaLearner
from proclab.run.checkpoints import crossed
from proclab.run.log import RunLogger, StepBar, Throughput
from proclab.run.runtime import seed_everything

VAL_EPISODES = 10  # the seed's valid_num_episodes: validation returns are means over the last 10 per game


def make_pool(config: TrainConfig, agent: torch.nn.Module, start_step: int):
    """Local actor processes, or Ray actors when ``ray_address`` is set."""
    if config.impala.ray_address:
        from proclab.rl.ray_actors import RayActorPool

        return RayActorPool(config, agent, start_step)
    from proclab.rl.actors import ActorPool

    return ActorPool(config, agent, start_step)


class ImpalaTrainer:
    """One IMPALA run: the learner in this process, the actors in others."""

    def __init__(self, config: TrainConfig, run_dir: Path | None = None, resume: bool = False):
        config.validate()
        self.config = cfg = config
        self.rt = cfg.runtime()
        seed_everything(cfg.seed)
        self.agent = self.rt.prepare(build_agent(cfg.agent))
        self.learner = ImpalaLearner(self.agent, cfg.impala, self.rt)
        self.batch = cfg.impala.batch_size * cfg.impala.unroll_length
        self.num_updates = cfg.impala.total_steps // self.batch
        self.games = cfg.env.games()
        self.train_log = EpisodeLog(self.games, cfg.env.mode)
        self.val_log = EpisodeLog(self.games, cfg.env.mode, window=VAL_EPISODES)
        self.global_step = 0
        self.wall_offset = 0.0
        self.throughput = Throughput()
        self.run_dir = run_dir if run_dir is not None else new_run_dir(cfg)
        resume_step = self._restore() if resume else None
        self.logger = RunLogger(
            self.run_dir,
            to_dict(cfg),
            tensorboard=cfg.tensorboard,
            wandb_project=cfg.wandb_project,
            resume_step=resume_step,
        )
        self.pool = make_pool(cfg, self.agent, self.global_step)

    # -- the loop ----------------------------------------------------------------------------
    def train(self, progress: bool = True) -> Path:
        start_time = time.time() - self.wall_offset
        bar = StepBar("train", self.num_updates * self.batch, self.global_step, enabled=progress)
        try:
            self.pool.publish(self.agent, self.learner.updates)  # before the actors start: they read it first
            with self.pool:
                self._loop(start_time, bar)
        finally:
            bar.close()
            self.logger.close()
        return self.run_dir

    def _loop(self, start_time: float, bar) -> None:
        cfg = self.config
        first = True
        while self.learner.updates < self.num_updates:
            t0 = time.time()
            batch = self.pool.next_batch(self._on_episodes)
            waited = time.time() - t0
            metrics = self.learner.update(batch.map(lambda x: x.to(self.rt.device, non_blocking=True)))
            self.pool.publish(self.agent, self.learner.updates)
            self.global_step += self.batch
            elapsed = time.time() - t0
            if not first:  # the first wait includes the actors' start-up
                self.throughput.add(elapsed, self.batch)
            first = False
            if self.learner.updates % cfg.log_every == 0:
                row = {
                    "charts/SPS": self.throughput.sps(),
                    "charts/learner_wait_fraction": waited / max(elapsed, 1e-9),
                    "charts/actor_restarts": self.pool.restarts,
                    **self.train_log.charts(),
                    **self.val_log.charts("val_"),
                    **metrics,
                }
                self.logger.log(self.global_step, time.time() - start_time, row)
            bar.update(self.global_step, recent_return(self.train_log))
            done = self.learner.updates >= self.num_updates
            if crossed(self.global_step - self.batch, self.global_step, cfg.checkpoint_every) or done:
                self.save_checkpoint(time.time() - start_time)

    def _on_episodes(self, episodes: dict, validation: bool) -> None:
        """Episodes an actor finished: ``game`` (index into the run's games), return, length, ..."""
        log = self.val_log if validation else self.train_log
        done = {"done": episodes["game"] >= 0, **episodes}
        log.add({"episode": done}, episodes["game"])

    # -- checkpoints ---------------------------------------------------------------------------
    def save_checkpoint(self, wall: float) -> Path:
        state = {
            "learner": self.learner.state_dict(),
            "global_step": self.global_step,
            "wall_time": wall,
            "train_log": self.train_log.state_dict(),
            "val_log": self.val_log.state_dict(),
        }
        return save_agent_checkpoint(
            self.run_dir, self.agent, self.config, self.games, self.global_step, state
        )

    def _restore(self) -> int:
        state = load_agent_checkpoint(self.run_dir, self.agent)
        self.learner.load_state_dict(state["learner"])
        self.global_step = int(state["global_step"])
        self.wall_offset = float(state["wall_time"])
        self.train_log.load_state_dict(state["train_log"])
        self.val_log.load_state_dict(state["val_log"])
        return self.global_step
