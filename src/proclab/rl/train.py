"""``proclab train``: the training loop around PPO, with validation, logging, checkpoints and resume.

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
import os
import time
from collections import deque
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist

from proclab.config import PRESETS, TrainConfig, from_dict, preset, to_dict
from proclab.envs import EpisodeLog, ProcgenVecEnv, RewardNormalizer, check_disjoint, parse_split
from proclab.errors import ProclabError
from proclab.io.checkpoint import find_checkpoint, load_checkpoint, save_checkpoint
from proclab.io.runs import MetricsLogger, create_run_dir, read_run_config
from proclab.models import build_agent
from proclab.rl.ppo import PPOLearner
from proclab.rl.rollout import Actor, Rollout
from proclab.rl.runtime import make_runtime, seed_everything


def game_label(games: tuple[str, ...]) -> str:
    return games[0] if len(games) == 1 else (("+".join(games)) if len(games) <= 3 else f"{len(games)}games")


def validate(config: TrainConfig, world: int = 1) -> None:
    """Refuse configurations that cannot run, before anything is created on disk."""
    env, ppo = config.env, config.ppo
    games = env.games()
    train_split = parse_split(env.split)
    if config.val_split is not None and config.val_num_envs > 0:
        check_disjoint(train_split, parse_split(config.val_split))
        if config.val_num_envs < len(games):
            raise ProclabError(f"val_num_envs={config.val_num_envs} is smaller than the {len(games)} games")
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
    if config.algo != "ppo":
        raise ProclabError(f"algo {config.algo!r} is not available in this command; use ppo")


class Trainer:
    """One training run (one process of it under torchrun)."""

    def __init__(self, config: TrainConfig, run_dir: Path | None = None, resume: bool = False):
        self.rank, self.world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
        validate(config, self.world)
        self.config = cfg = config
        self.rt = make_runtime(cfg.device, cfg.precision, cfg.torch_threads)
        seed_everything(cfg.seed)  # same initial weights on every rank
        self.agent = self.rt.prepare(build_agent(cfg.agent))
        if self.world > 1:
            for p in self.agent.parameters():
                dist.broadcast(p.data, 0)
        torch.manual_seed(cfg.seed + 1000 * self.rank)  # per-rank action sampling and shuffling

        n_local = cfg.env.num_envs // self.world
        gamma = cfg.ppo.reward_norm_gamma if cfg.ppo.reward_norm_gamma is not None else cfg.ppo.gamma
        env = ProcgenVecEnv(cfg.env, seed=cfg.seed * 1000 + self.rank, num_envs=n_local)
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
        self.sps_window: deque[tuple[float, int]] = deque(maxlen=10)

        if run_dir is None and self.rank == 0:
            run_dir = create_run_dir(
                cfg.run_root, cfg.algo, game_label(games), cfg.name, cfg.seed, to_dict(cfg)
            )
        self.run_dir = run_dir
        resume_step = None
        if resume:
            resume_step = self._restore(find_checkpoint(run_dir))
        self.logger = MetricsLogger(run_dir, cfg.tensorboard, resume_step) if self.rank == 0 else None
        self._wandb = self._init_wandb() if self.rank == 0 and cfg.wandb_project else None

    # -- the loop ----------------------------------------------------------------------------
    def train(self, progress: bool = True) -> Path:
        cfg = self.config
        next_ckpt = (self.global_step // cfg.checkpoint_every + 1) * cfg.checkpoint_every
        start_time = time.time() - self.wall_offset
        bar = _progress(progress and self.rank == 0, self.num_updates * self.batch, self.global_step)
        while self.learner.updates < self.num_updates:
            t0 = time.time()
            self.actor.collect(self.rollout, on_info=self._on_train_info)
            metrics = self.learner.update(self.rollout)
            self.global_step += self.batch
            self.sps_window.append((time.time() - t0, self.batch))
            if self.rank == 0 and self.learner.updates % cfg.log_every == 0:
                self._log(metrics, time.time() - start_time)
            if bar is not None:
                bar.update(self.global_step, self.train_log.summary().get("return_mean"))
            done = self.learner.updates >= self.num_updates
            if self.global_step >= next_ckpt or done:
                self.save_checkpoint(time.time() - start_time)
                next_ckpt += cfg.checkpoint_every * max(
                    1, (self.global_step - next_ckpt) // cfg.checkpoint_every + 1
                )
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

    def _on_train_info(self, info: dict) -> None:
        self.train_log.add(info, self.env.game_index)
        if self.val_actor is not None:  # one validation step per training step, same policy
            _, action, _, state = self.val_actor.act()
            _, _, val_info = self.val_actor.env_step(action, state)
            self.val_log.add(val_info, self.val_actor.env.game_index)

    def _log(self, metrics: dict[str, float], wall: float) -> None:
        secs = sum(t for t, _ in self.sps_window)
        row = {"charts/SPS": sum(n for _, n in self.sps_window) / max(secs, 1e-9)}
        for prefix, log in (("", self.train_log), ("val_", self.val_log)):
            for key, value in log.summary().items():
                game, _, stat = key.rpartition("/")
                name = {"return_mean": "episodic_return", "length_mean": "episodic_length"}.get(stat, stat)
                row[f"charts/{game + '/' if game else ''}{prefix}{name}"] = value
        row.update(metrics)
        self.logger.log(self.global_step, wall, row)
        if self._wandb is not None:
            self._wandb.log(row, step=self.global_step)

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
            "train_log": _log_state(self.train_log),
            "val_log": _log_state(self.val_log),
        }

    def save_checkpoint(self, wall: float) -> Path | None:
        local = self._local_train_state()
        ranks = [None] * self.world
        if self.world > 1:
            dist.gather_object(local, ranks if self.rank == 0 else None, dst=0)
        else:
            ranks = [local]
        if self.rank != 0:
            return None
        state = {
            "learner": self.learner.state_dict(),
            "global_step": self.global_step,
            "wall_time": wall,
            "ranks": ranks,
        }
        meta = {
            "kind": "agent",
            "algo": self.config.algo,
            "step": self.global_step,
            "games": list(self.env.games),
            "agent": to_dict(self.config.agent),
            "env": to_dict(self.config.env),
            "train": to_dict(self.config),
        }
        path = save_checkpoint(
            self.run_dir / "checkpoints" / f"step_{self.global_step:012d}",
            self.agent.state_dict(),
            meta,
            state,
        )
        self._prune_checkpoints()
        return path

    def _prune_checkpoints(self) -> None:
        keep = self.config.keep_checkpoints
        if keep <= 0:
            return
        import shutil

        found = sorted((self.run_dir / "checkpoints").glob("step_*"))
        for old in found[:-keep]:
            shutil.rmtree(old, ignore_errors=True)

    def _restore(self, path: Path) -> int:
        from proclab.io.checkpoint import load_weights_into

        ckpt = load_checkpoint(path, kind="agent", train_state=True)
        load_weights_into(self.agent, ckpt.weights, path)
        state = ckpt.train_state
        if len(state["ranks"]) != self.world:
            raise ProclabError(
                f"checkpoint {str(path)!r} was written by {len(state['ranks'])} processes; resume it with as many"
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
        _load_log_state(self.train_log, local["train_log"])
        _load_log_state(self.val_log, local["val_log"])
        return self.global_step

    def _init_wandb(self):
        try:
            import wandb
        except ImportError:
            raise ProclabError("--wandb-project needs wandb: pip install 'proclab[wandb]'") from None
        return wandb.init(project=self.config.wandb_project, config=to_dict(self.config), dir=str(self.run_dir),
                          name=self.run_dir.name, resume="allow")  # fmt: skip


def _restore_actor(actor: Actor, carried: dict, device) -> None:
    obs, _ = actor.env.set_state(carried["env"])
    actor.obs = actor.rt.obs_tensor(obs)
    actor.first = carried["first"].to(device)
    actor.prev_reward = carried["prev_reward"].to(device)
    actor.state = {k: v.to(device) for k, v in carried["state"].items()}


def _log_state(log: EpisodeLog) -> dict:
    return {
        "returns": {g: list(d) for g, d in log.returns.items()},
        "lengths": {g: list(d) for g, d in log.lengths.items()},
        "completed": {g: list(d) for g, d in log.completed.items()},
        "total": log.total,
    }


def _load_log_state(log: EpisodeLog, state: dict) -> None:
    for name in ("returns", "lengths", "completed"):
        for g, values in state[name].items():
            getattr(log, name)[g].extend(values)
    log.total = state["total"]


def _progress(enabled: bool, total: int, start: int) -> _StepBar | None:
    return _StepBar(total, start) if enabled else None


class _StepBar:
    """A rich progress bar over env steps with the recent training return."""

    def __init__(self, total: int, start: int):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[ret]}"), TimeRemainingColumn())  # fmt: skip
        self.task = self.bar.add_task("train", total=total, completed=start, ret="")
        self.bar.start()

    def update(self, step: int, ret: float | None) -> None:
        self.bar.update(self.task, completed=step, ret="" if ret is None else f"return {ret:.2f}")

    def close(self) -> None:
        self.bar.stop()


# -- command line ------------------------------------------------------------------------------
def parse_args(argv: list[str], prog: str = "proclab train") -> tuple[TrainConfig, Path | None]:
    """``--preset NAME`` picks the defaults, other flags override fields; ``--resume RUN_DIR`` continues."""
    import tyro

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", default=None)
    pre.add_argument("--resume", type=Path, default=None)
    known, rest = pre.parse_known_args(argv)
    if known.resume is not None:
        extra = [a for a in rest if a.startswith("--") and not a.startswith("--total-steps")]
        if extra or known.preset:
            raise ProclabError(
                f"--resume continues a run with its saved config; drop {', '.join(extra) or '--preset'} "
                "(only --total-steps may change)"
            )
        saved = from_dict(TrainConfig, read_run_config(known.resume))
        find_checkpoint(known.resume)  # fail now, not after building envs, if there is nothing to resume
        if rest:
            override = tyro.cli(TrainConfig, args=rest, default=saved, prog=prog,
                                config=(tyro.conf.OmitArgPrefixes,))  # fmt: skip
            saved = replace(saved, ppo=replace(saved.ppo, total_steps=override.ppo.total_steps))
        return saved, known.resume
    base = preset(known.preset) if known.preset else TrainConfig()
    description = (
        "Train a PPO agent on Procgen.\n\n"
        f"--preset NAME   start from a named setting: {', '.join(PRESETS)} (flags below override it)\n"
        "--resume RUN_DIR   continue a stopped run exactly from its last checkpoint"
    )
    config = tyro.cli(TrainConfig, args=rest, default=base, prog=prog, description=description,
                      config=(tyro.conf.OmitArgPrefixes,))  # fmt: skip
    return config, None


def main(argv: list[str], prog: str = "proclab train") -> None:
    config, resume_dir = parse_args(argv, prog)
    if "LOCAL_RANK" in os.environ and not dist.is_initialized():  # launched by torchrun
        backend = "nccl" if torch.cuda.is_available() and config.device != "cpu" else "gloo"
        dist.init_process_group(backend)
        if backend == "nccl":
            local = int(os.environ["LOCAL_RANK"])
            torch.cuda.set_device(local)
            config = replace(config, device=f"cuda:{local}")
    run_dir = resume_dir
    if dist.is_initialized() and resume_dir is None:  # every rank writes to rank 0's run directory
        holder = [None]
        if dist.get_rank() == 0:
            validate(config, dist.get_world_size())
            holder[0] = str(create_run_dir(config.run_root, config.algo, game_label(config.env.games()),
                                           config.name, config.seed, to_dict(config)))  # fmt: skip
        dist.broadcast_object_list(holder, src=0)
        run_dir = Path(holder[0])
    try:
        trainer = Trainer(config, run_dir=run_dir, resume=resume_dir is not None)
        out = trainer.train()
        if trainer.rank == 0:
            summary = trainer.train_log.summary()
            ret = summary.get("return_mean", float("nan"))
            print(f"trained {trainer.global_step:,} steps; recent train return {ret:.2f}")
            print(f"run directory: {out}")
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
