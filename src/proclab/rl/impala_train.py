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

import importlib.util
import time
from pathlib import Path

import torch

from proclab.config import REDUCTIONS, REWARD_CLIPPINGS, TrainConfig
from proclab.envs import EpisodeLog
from proclab.errors import ProclabError, unknown_choice
from proclab.models import build_agent
from proclab.rl.impala import ImpalaLearner
from proclab.rl.loop import (
    RunLogger,
    Throughput,
    crossed,
    episode_metrics,
    load_agent_checkpoint,
    load_log_state,
    log_state,
    new_run_dir,
    progress_bar,
    save_agent_checkpoint,
)
from proclab.rl.runtime import make_runtime, seed_everything

VAL_EPISODES = 10  # the seed's valid_num_episodes: validation returns are means over the last 10 per game


def validate_impala(config: TrainConfig, world: int = 1) -> None:
    """Refuse IMPALA settings that cannot run, with the valid alternative in the message."""
    cfg, env = config.impala, config.env
    games = env.games()
    if world > 1:
        raise ProclabError("IMPALA scales with actors (--num-actors, --ray-address), not torchrun")
    if cfg.num_actors < 1 or env.num_envs < 1 or env.num_envs % cfg.num_actors:
        raise ProclabError(
            f"num_envs={env.num_envs} does not split evenly over num_actors={cfg.num_actors}; "
            "give every actor the same number of envs"
        )
    if env.num_envs % len(games):
        raise ProclabError(
            f"multi-task list of {len(games)} games ({', '.join(games)}) does not divide num_envs={env.num_envs}; "
            f"use a multiple of {len(games)} envs so that every game gets the same number"
        )
    per_actor = env.num_envs // cfg.num_actors
    if cfg.batch_size < 1 or cfg.batch_size % per_actor:
        raise ProclabError(
            f"batch_size={cfg.batch_size} is not a multiple of the {per_actor} envs per actor "
            f"(num_envs {env.num_envs} / num_actors {cfg.num_actors}); an actor sends all its envs' unrolls at once"
        )
    if cfg.unroll_length < 1:
        raise ProclabError(f"unroll_length={cfg.unroll_length} must be >= 1")
    batch = cfg.batch_size * cfg.unroll_length
    if cfg.total_steps < batch:
        raise ProclabError(
            f"total_steps={cfg.total_steps} is smaller than one batch (batch_size {cfg.batch_size} x "
            f"unroll_length {cfg.unroll_length} = {batch}); raise --total-steps or shrink the batch"
        )
    if cfg.reward_clipping not in REWARD_CLIPPINGS:
        raise unknown_choice("reward clipping", cfg.reward_clipping, REWARD_CLIPPINGS)
    if cfg.reduction not in REDUCTIONS:
        raise unknown_choice("loss reduction", cfg.reduction, REDUCTIONS)
    bad = [f"{k}={getattr(cfg, k)}" for k in ("rho_bar", "c_bar", "pg_rho_bar") if getattr(cfg, k) <= 0]
    if bad:
        raise ProclabError(f"V-trace truncation levels must be positive: {', '.join(bad)}")
    if cfg.ray_address and importlib.util.find_spec("ray") is None:
        raise ProclabError("--ray-address needs Ray: pip install 'proclab[distributed]'")


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
        from proclab.rl.train import validate

        validate(config)
        self.config = cfg = config
        self.rt = make_runtime(cfg.device, cfg.precision, cfg.torch_threads, cfg.channels_last)
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
        self.logger = RunLogger(self.run_dir, cfg, resume_step)
        self.pool = make_pool(cfg, self.agent, self.global_step)

    # -- the loop ----------------------------------------------------------------------------
    def train(self, progress: bool = True) -> Path:
        start_time = time.time() - self.wall_offset
        bar = progress_bar(progress, self.num_updates * self.batch, self.global_step)
        try:
            self.pool.publish(self.agent, self.learner.updates)  # before the actors start: they read it first
            with self.pool:
                self._loop(start_time, bar)
        finally:
            if bar is not None:
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
                    **episode_metrics(self.train_log, self.val_log),
                    **metrics,
                }
                self.logger.log(self.global_step, time.time() - start_time, row)
            if bar is not None:
                bar.update(self.global_step, self.train_log.summary().get("return_mean"))
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
            "train_log": log_state(self.train_log),
            "val_log": log_state(self.val_log),
        }
        return save_agent_checkpoint(
            self.run_dir, self.agent, self.config, self.games, self.global_step, state
        )

    def _restore(self) -> int:
        state = load_agent_checkpoint(self.run_dir, self.agent)
        self.learner.load_state_dict(state["learner"])
        self.global_step = int(state["global_step"])
        self.wall_offset = float(state["wall_time"])
        load_log_state(self.train_log, state["train_log"])
        load_log_state(self.val_log, state["val_log"])
        return self.global_step
