"""``proclab train``: the training loop around PPO, with validation, logging, checkpoints and resume.

``--algo impala`` (or an ``impala-*`` preset) runs IMPALA instead
(:mod:`proclab.rl.impala_train`); both share run directories, logging and checkpoints
(:mod:`proclab.rl.loop`) and this command line.

The loop is the same for every agent: an :class:`~proclab.rl.rollout.Actor` fills a rollout
from the training envs (a second actor steps a validation env on other levels with the same
policy), :class:`~proclab.rl.ppo.PPOLearner` updates the agent, a row of metrics is written,
and every ``checkpoint_every`` steps the full training state is saved. ``--resume RUN_DIR``
restores that state (weights, optimiser, reward normaliser, RNGs, procgen's own game states,
the actors' carried observations and agent states) so the run continues exactly as if it had
never stopped.

Several processes: ``torchrun --nproc_per_node N -m proclab train ...`` gives each rank
``num_envs / N`` envs (seeded per rank) and averages gradients across ranks every step.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
import torch.distributed as dist
import tyro

from proclab.config import (
    ADV_NORM_SCOPES,
    ALGOS,
    PRESETS,
    REPLAY_RESETS,
    ImpalaConfig,
    PPOConfig,
    TrainConfig,
    from_dict,
    preset,
)
from proclab.envs import EpisodeLog, ProcgenVecEnv, RewardNormalizer, check_disjoint, parse_split
from proclab.errors import ProclabError, unknown_choice
from proclab.io.checkpoint import find_checkpoint
from proclab.io.runs import read_run_config
from proclab.models import STATELESS_CORES, build_agent
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
from proclab.rl.ppo import PPOLearner
from proclab.rl.rollout import Actor, Rollout
from proclab.rl.runtime import (
    broadcast_parameters,
    gather_on_rank0,
    join_torchrun,
    make_runtime,
    on_rank0,
    out_of_time,
    rank_and_world,
    seed_everything,
)


def validate(config: TrainConfig, world: int = 1) -> None:
    """Refuse configurations that cannot run, before anything is created on disk."""
    if config.algo not in ALGOS:
        raise unknown_choice("algo", config.algo, ALGOS)
    env, ppo = config.env, config.ppo
    games = env.games()
    train_split = parse_split(env.split)
    if config.val_split is not None and config.val_num_envs > 0:
        check_disjoint(train_split, parse_split(config.val_split))
        if config.val_num_envs < len(games):
            raise ProclabError(f"val_num_envs={config.val_num_envs} is smaller than the {len(games)} games")
    if config.algo == "impala":
        from proclab.rl.impala_train import validate_impala

        validate_impala(config, world)
        return
    if env.num_envs < 1 or env.num_envs % world:
        raise ProclabError(f"num_envs={env.num_envs} must be a positive multiple of the {world} processes")
    batch = env.num_envs * ppo.num_steps
    if ppo.total_steps < batch:
        raise ProclabError(
            f"total_steps={ppo.total_steps} is smaller than one rollout (num_envs {env.num_envs} x "
            f"num_steps {ppo.num_steps} = {batch}); raise --total-steps or shrink the rollout"
        )
    if ppo.num_minibatches < 1 or ppo.update_epochs < 1:
        raise ProclabError("num_minibatches and update_epochs must be >= 1")
    if ppo.norm_adv_scope not in ADV_NORM_SCOPES:
        raise unknown_choice("norm_adv_scope", ppo.norm_adv_scope, ADV_NORM_SCOPES)
    if ppo.replay_reset not in REPLAY_RESETS:
        raise unknown_choice("replay_reset", ppo.replay_reset, REPLAY_RESETS)
    # minibatches split whole env sequences (agents with memory) or samples: all equal, as many as asked
    sequences = config.agent.core not in STATELESS_CORES
    items = env.num_envs // world * (1 if sequences else ppo.num_steps)
    if items % ppo.num_minibatches:
        what = "envs per process" if sequences else "samples per process (envs x num_steps)"
        raise ProclabError(
            f"num_minibatches={ppo.num_minibatches} does not divide the {items} {what}; "
            "choose a divisor so that every minibatch is the same size"
        )


class Trainer:
    """One training run (one process of it under torchrun)."""

    def __init__(self, config: TrainConfig, run_dir: Path | None = None, resume: bool = False):
        self.rank, self.world = rank_and_world()
        validate(config, self.world)
        self.config = cfg = config
        self.rt = make_runtime(cfg.device, cfg.precision, cfg.torch_threads, cfg.channels_last)
        seed_everything(cfg.seed)  # same initial weights on every rank
        self.agent = self.rt.prepare(build_agent(cfg.agent))
        broadcast_parameters(self.agent)
        torch.manual_seed(cfg.seed + 1000 * self.rank)  # per-rank action sampling and shuffling

        n_local = cfg.env.num_envs // self.world
        gamma = cfg.ppo.reward_norm_gamma if cfg.ppo.reward_norm_gamma is not None else cfg.ppo.gamma
        env = self.wrap_env(ProcgenVecEnv(cfg.env, seed=cfg.seed * 1000 + self.rank, num_envs=n_local))
        self.env = RewardNormalizer(env, gamma, cfg.ppo.reward_clip) if cfg.ppo.normalize_reward else env
        self.actor = Actor(self.env, self.agent, self.rt)
        self.val_actor = None
        if cfg.val_split is not None and cfg.val_num_envs > 0:
            val_env = ProcgenVecEnv(
                cfg.env,
                seed=cfg.seed * 1000 + 500 + self.rank,
                num_envs=cfg.val_num_envs,
                split=cfg.val_split,
            )
            self.val_actor = Actor(val_env, self.agent, self.rt)

        self.batch = cfg.env.num_envs * cfg.ppo.num_steps
        self.num_updates = cfg.ppo.total_steps // self.batch
        self.learner = PPOLearner(self.agent, cfg.ppo, self.rt, self.num_updates)
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
        self.logger = RunLogger(run_dir, cfg, resume_step) if self.rank == 0 else None

    # -- the loop ----------------------------------------------------------------------------
    def train(self, progress: bool = True) -> Path:
        cfg = self.config
        start_time = time.time() - self.wall_offset
        bar = progress_bar(progress and self.rank == 0, self.num_updates * self.batch, self.global_step)
        deadline = time.time() + cfg.time_limit if cfg.time_limit > 0 else None
        done = False
        while not done:
            t0 = time.time()
            self.actor.collect(self.rollout, on_info=self._on_train_info)
            metrics = self.learner.update(self.rollout)
            self.global_step += self.batch
            self.throughput.add(time.time() - t0, self.batch)
            if self.rank == 0 and self.learner.updates % cfg.log_every == 0:
                row = {"charts/SPS": self.throughput.sps(), **episode_metrics(self.train_log, self.val_log),
                       **self.extra_metrics()}  # fmt: skip
                self.logger.log(self.global_step, time.time() - start_time, {**row, **metrics})
            if bar is not None:
                bar.update(self.global_step, self.train_log.summary().get("return_mean"))
            done = self.learner.updates >= self.num_updates or out_of_time(
                deadline, self.world, self.rt.device
            )
            if crossed(self.global_step - self.batch, self.global_step, cfg.checkpoint_every) or done:
                self.save_checkpoint(time.time() - start_time)
        if bar is not None:
            bar.close()
        if self.world > 1:
            self._check_replicas()
        if self.logger is not None:
            self.logger.close()
        return self.run_dir

    def _check_replicas(self) -> None:
        """All ranks must hold the same weights (averaged gradients, same optimiser steps)."""
        flat = torch.cat([p.detach().float().reshape(-1) for p in self.agent.parameters()])
        reference = flat.clone()
        dist.broadcast(reference, 0)
        diff = (flat - reference).abs().max()
        dist.all_reduce(diff, op=dist.ReduceOp.MAX)
        if float(diff) > 0:
            raise RuntimeError(f"replicas diverged across ranks (max weight difference {float(diff):.3g})")

    # -- hooks for subclasses (trex train-policy: a learned reward in place of the env's) -----------
    def wrap_env(self, env):
        """Wrap the training env below reward normalisation; the default keeps it as it is."""
        return env

    def extra_metrics(self) -> dict[str, float]:
        """More metrics for each logged row; none by default."""
        return {}

    def _on_train_info(self, info: dict) -> None:
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
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "actor": self._carried(self.actor),
            "val_actor": self._carried(self.val_actor) if self.val_actor is not None else None,
            "train_log": log_state(self.train_log),
            "val_log": log_state(self.val_log),
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
        return save_agent_checkpoint(
            self.run_dir, self.agent, self.config, self.env.games, self.global_step, state
        )

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
        torch.set_rng_state(local["torch_rng"])
        if torch.cuda.is_available() and local["cuda_rng"]:
            torch.cuda.set_rng_state_all(local["cuda_rng"])
        _restore_actor(self.actor, local["actor"], self.rt.device)
        if self.val_actor is not None and local["val_actor"] is not None:
            _restore_actor(self.val_actor, local["val_actor"], self.rt.device)
        load_log_state(self.train_log, local["train_log"])
        load_log_state(self.val_log, local["val_log"])
        return self.global_step


def _restore_actor(actor: Actor, carried: dict, device) -> None:
    obs, _ = actor.env.set_state(carried["env"])
    actor.obs = actor.rt.obs_tensor(obs)
    actor.first = carried["first"].to(device)
    actor.prev_reward = carried["prev_reward"].to(device)
    actor.state = {k: v.to(device) for k, v in carried["state"].items()}


# -- command line ------------------------------------------------------------------------------
# One flag set per algorithm: the other algorithm's settings are hidden (their names overlap,
# e.g. --total-steps, --learning-rate, --gamma), and are kept at their defaults.
@dataclass(frozen=True)
class _PPOArgs(TrainConfig):
    impala: tyro.conf.Suppress[ImpalaConfig] = field(default_factory=ImpalaConfig)


@dataclass(frozen=True)
class _ImpalaArgs(TrainConfig):
    ppo: tyro.conf.Suppress[PPOConfig] = field(default_factory=PPOConfig)


_ARGS = {"ppo": _PPOArgs, "impala": _ImpalaArgs}
DESCRIPTION = """Train an agent on Procgen with PPO (default) or IMPALA (--algo impala, or an impala-* preset;
'proclab train --algo impala --help' lists IMPALA's options; --algo impala alone starts from impala-procgen).

--preset NAME   start from a named setting: {presets} (flags below override it)
--resume RUN_DIR   continue a stopped run from its last checkpoint (PPO: exactly; IMPALA: weights,
                   optimiser, learning-rate schedule and counters, with fresh actors)"""


def _as(cls: type, config: TrainConfig) -> TrainConfig:
    return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(TrainConfig)})


def _cli(rest: list[str], default: TrainConfig, prog: str, description: str | None = None) -> TrainConfig:
    if default.algo not in ALGOS:
        raise unknown_choice("algo", default.algo, ALGOS)
    cls = _ARGS[default.algo]
    parsed = tyro.cli(cls, args=rest, default=_as(cls, default), prog=prog, description=description,
                      config=(tyro.conf.OmitArgPrefixes,))  # fmt: skip
    return _as(TrainConfig, parsed)


def parse_args(argv: list[str], prog: str = "proclab train") -> tuple[TrainConfig, Path | None]:
    """``--preset NAME`` picks the defaults, other flags override fields; ``--resume RUN_DIR`` continues."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", default=None)
    pre.add_argument("--resume", type=Path, default=None)
    pre.add_argument("--algo", default=None)
    known, rest = pre.parse_known_args(argv)
    if known.resume is not None:
        extra = [a for a in rest if a.startswith("--") and not a.startswith("--total-steps")]
        if extra or known.preset or known.algo:
            raise ProclabError(
                f"--resume continues a run with its saved config; drop "
                f"{', '.join(extra) or ('--preset' if known.preset else '--algo')} (only --total-steps may change)"
            )
        saved = from_dict(TrainConfig, read_run_config(known.resume))
        find_checkpoint(known.resume)  # fail now, not after building envs, if there is nothing to resume
        if rest:
            override = _cli(rest, saved, prog)
            algo = saved.algo
            total = getattr(override, algo).total_steps
            saved = replace(saved, **{algo: replace(getattr(saved, algo), total_steps=total)})
        return saved, known.resume
    if known.preset:
        base = preset(known.preset)
    else:  # --algo impala alone starts from the seed's single-game setting
        base = preset("impala-procgen") if known.algo == "impala" else TrainConfig()
    if known.algo is not None:
        base = replace(base, algo=known.algo)
    return _cli(rest, base, prog, DESCRIPTION.format(presets=", ".join(PRESETS))), None


def _report(trainer, out: Path) -> None:
    ret = trainer.train_log.summary().get("return_mean", float("nan"))
    print(f"trained {trainer.global_step:,} steps; recent train return {ret:.2f}")
    print(f"run directory: {out}")


def main(argv: list[str], prog: str = "proclab train") -> None:
    config, resume_dir = parse_args(argv, prog)
    if config.algo == "impala":
        if "LOCAL_RANK" in os.environ:
            raise ProclabError(
                "IMPALA scales with actors (--num-actors, --ray-address), not torchrun; "
                "run it as a single process: proclab train --algo impala ..."
            )
        from proclab.rl.impala_train import ImpalaTrainer

        trainer = ImpalaTrainer(config, run_dir=resume_dir, resume=resume_dir is not None)
        _report(trainer, trainer.train())
        return
    config = replace(config, device=join_torchrun(config.device))
    run_dir = resume_dir
    if dist.is_initialized() and resume_dir is None:  # every rank writes to rank 0's run directory
        validate(config, dist.get_world_size())
        run_dir = on_rank0(lambda: new_run_dir(config))
    try:
        trainer = Trainer(config, run_dir=run_dir, resume=resume_dir is not None)
        out = trainer.train()
        if trainer.rank == 0:
            _report(trainer, out)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
