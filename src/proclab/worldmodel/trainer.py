"""Teach the generative model to simulate an agent in its world, from an episode store.

Each update takes ``batch_size`` windows of the store (:mod:`.batch`), runs the model with
teacher forcing (recorded actions, posterior samples, the agent starting from its recorded
state; :func:`~.simulate.teacher_forced`), and takes one Adam step on the loss table of
:mod:`.losses` (gradient-norm clip 100, as the seed). The agent in the loop is frozen; its
weights are saved inside every checkpoint (:mod:`.checkpoint`).

Outputs in ``RUN_ROOT/wm/GAME/NAME/SEED-TIMESTAMP/``: ``config.json``, ``metrics.csv`` and
TensorBoard events (every loss term, unweighted, plus throughput), ``checkpoints/step_<N>``
and ``videos/step_<N>.mp4`` (true | teacher-forced | closed loop, :mod:`.videos`).

:func:`train_world_model` trains in this process and returns the trained model (:mod:`.train` is the
command line, which also starts several processes under torchrun).

**Exact resume.** ``--resume RUN_DIR`` restores the weights, the optimiser, every process's RNG
state, the update counter and the data position: each epoch's window order is a permutation
seeded by ``(seed, epoch)``, and the checkpoint records the epoch and the batches already
taken from it, so the resumed run sees the same batches in the same order and ends with
bit-identical weights (tested). Worker processes draw no random numbers.

**Several processes.** ``torchrun --nproc_per_node N -m proclab wm train ...``: every rank
takes its share of each global batch and gradients are averaged before each step (the helper
PPO uses). bf16 autocast (``--precision``) covers convolutions and matmuls; the RSSM's
recurrence, the distributions and the losses run in float32.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler, default_collate

from proclab.errors import ProclabError
from proclab.io.checkpoint import find_checkpoint, load_checkpoint
from proclab.io.configs import to_dict, with_fields
from proclab.io.run_dirs import create_run_dir, game_label
from proclab.models.loading import freeze, load_agent
from proclab.run.distributed import (
    average_gradients,
    broadcast_parameters,
    deadline,
    gather_on_rank0,
    out_of_time,
    start_training,
)
from proclab.run.log import RunLogger, StepBar
from proclab.run.runtime import restore_rng_state, rng_state
from proclab.store import EpisodeStore
from proclab.store.windows import WindowDataset
from proclab.worldmodel.batch import make_batch, window_dataset
from proclab.worldmodel.checkpoint import KIND, TrainedWorldModel, load_world_model, save_world_model
from proclab.worldmodel.config import WMTrainConfig, wm_size
from proclab.worldmodel.losses import shift_labels, world_model_loss
from proclab.worldmodel.model import WorldModel
from proclab.worldmodel.simulate import open_loop_pass, teacher_forced
from proclab.worldmodel.videos import prediction_video


class EpochBatches(Sampler[list[int]]):
    """This process's share of each global batch of an epoch, from batch ``position`` on.

    Epoch ``e`` visits the windows in a permutation seeded by ``(seed, e)``, cut into
    ``n // batch_size`` global batches (the rest is dropped, as the seed's ``drop_last``);
    rank ``r`` of ``world`` takes every ``world``-th window of each.
    """

    def __init__(self, n: int, batch_size: int, seed: int, rank: int = 0, world: int = 1):
        self.n, self.batch_size, self.seed, self.rank, self.world = n, batch_size, seed, rank, world
        self.batches = n // batch_size
        self.epoch = self.position = 0

    def set_epoch(self, epoch: int, position: int = 0) -> None:
        self.epoch, self.position = epoch, position

    def __iter__(self):
        perm = np.random.default_rng([self.seed, self.epoch]).permutation(self.n)
        for b in range(self.position, self.batches):
            yield perm[b * self.batch_size : (b + 1) * self.batch_size][self.rank :: self.world].tolist()

    def __len__(self) -> int:
        return self.batches - self.position


def new_run_dir(config: WMTrainConfig, store: EpisodeStore) -> Path:
    """``RUN_ROOT/wm/GAME/NAME/SEED-TIMESTAMP`` holding the resolved config."""
    games = game_label(tuple(store.games) or ("unknown",))
    return create_run_dir(config.run_root, "wm", games, config.name, config.seed, to_dict(config))


def full_windows(dataset: WindowDataset) -> np.ndarray:
    """Indices of the windows that lie entirely inside their episode (all of them if none does)."""
    lengths = dataset.store.episodes["length"][dataset.episode_ids]
    full = np.flatnonzero(dataset.offsets + dataset.length <= lengths)
    return full if len(full) else np.arange(len(dataset))


def recorded_agent(store: EpisodeStore) -> Path:
    """The checkpoint that recorded ``store`` (one recording's, if several wrote it)."""
    found = store.recording_checkpoints()
    if len(found) != 1:
        raise ProclabError(
            f"episode store {str(store.path)!r} was recorded by {len(found) or 'no'} known checkpoint(s); "
            "name the agent with --agent AGENT"
        )
    return found[0]


class WMTrainer:
    """One training run (one process of it under torchrun)."""

    def __init__(self, config: WMTrainConfig, run_dir: Path | None = None, resume: bool = False):
        self.rank, self.world, self.rt = start_training(config)
        self.config = cfg = config
        self.store = EpisodeStore(cfg.data)
        ckpt = find_checkpoint(run_dir) if resume else None
        if ckpt is not None:  # the agent saved with the world model, wherever its checkpoint went since
            self.wm, self.agent, saved = load_world_model(ckpt, self.rt, train_state=True)
            self.agent_source = saved.meta["agent_source"]
            self.agent_env = saved.meta["agent_env"]
        else:
            agent_path = cfg.agent or recorded_agent(self.store)
            self.agent, env_config, agent_ckpt = load_agent(agent_path, self.rt)
            self.agent_source = {"path": str(agent_ckpt.path), "step": agent_ckpt.step}
            self.agent_env = to_dict(env_config)
            self.wm = self.rt.prepare(
                WorldModel(cfg.model, self.agent.config.num_actions, self.agent.state_shapes())
            )
        freeze(self.agent)
        self.store.check_agent(self.agent.config.num_actions, self.agent.state_shapes())
        if cfg.loss.policy_kl and "logits_clean" not in self.store.fields:
            raise ProclabError(
                f"--loss.policy-kl needs the agent's logits, and episode store {str(cfg.data)!r} has none "
                "(record it with proclab record)"
            )
        broadcast_parameters(self.wm)
        torch.manual_seed(cfg.seed + 1000 * self.rank)  # per-rank posterior samples
        self.optimizer = torch.optim.Adam(self.wm.parameters(), lr=cfg.learning_rate)

        self.dataset = window_dataset(
            self.store, cfg.model, self.wm.codec, cfg.reward_field, cfg.window_stride
        )
        if len(self.dataset) < cfg.batch_size:
            raise ProclabError(
                f"episode store {str(cfg.data)!r} has {len(self.dataset)} training windows of "
                f"{cfg.model.window} steps, fewer than one batch ({cfg.batch_size}); record more episodes "
                "or lower --batch-size"
            )
        self.sampler = EpochBatches(len(self.dataset), cfg.batch_size, cfg.seed, self.rank, self.world)
        self.loader = DataLoader(
            self.dataset,
            batch_sampler=self.sampler,
            num_workers=cfg.num_workers,
            persistent_workers=cfg.num_workers > 0,
            pin_memory=self.rt.device.type == "cuda",
            generator=torch.Generator(),  # worker seeding must not consume the global RNG (exact resume)
        )
        self.updates = self.epoch = self.position = 0
        self.wall_offset = 0.0
        """Seconds of training in the sessions before this one (resumed runs)."""
        self.train_seconds = 0.0
        """Seconds of training in all sessions, when this one ended."""

        if run_dir is None and self.rank == 0:
            run_dir = new_run_dir(cfg, self.store)
        self.run_dir = run_dir
        if ckpt is not None:
            self._restore(saved.train_state)
        self.logger = None
        if self.rank == 0:
            self.logger = RunLogger(
                run_dir,
                to_dict(cfg),
                tensorboard=cfg.tensorboard,
                resume_step=self.updates if resume else None,
            )
        self._video_batch = None

    def close(self) -> None:
        """Stop the loader's worker processes now: a persistent loader keeps them until it is dropped."""
        self.loader = None

    # -- the loop ----------------------------------------------------------------------------
    def train(self, progress: bool = True) -> Path:
        cfg = self.config
        start_time = time.time() - self.wall_offset
        sums: dict[str, torch.Tensor] = {}
        count, t_last = 0, time.time()
        bar = StepBar("wm train", cfg.total_updates, self.updates, enabled=progress and self.rank == 0)
        stop_at = deadline(cfg.time_limit)
        done = self.updates >= cfg.total_updates
        try:
            while not done:
                self.sampler.set_epoch(self.epoch, self.position)
                for items in self.loader:
                    for k, v in self.update(items).items():
                        sums[k] = sums.get(k, 0) + v
                    count += 1
                    self.updates += 1
                    self.position += 1
                    done = self.updates >= cfg.total_updates or out_of_time(
                        stop_at, self.world, self.rt.device
                    )
                    if self.rank == 0 and (self.updates % cfg.log_every == 0 or done):
                        now = time.time()
                        row = {k: float(v) / count for k, v in sums.items()}
                        row["charts/sequences_per_second"] = count * cfg.batch_size / max(now - t_last, 1e-9)
                        row["charts/epoch"] = self.epoch + self.position / self.sampler.batches
                        self.logger.log(self.updates, now - start_time, row)
                        bar.update(self.updates, f"loss {row['losses/total']:.1f}")
                        sums, count, t_last = {}, 0, now
                    bar.update(self.updates)
                    if self.rank == 0 and ((cfg.video_every and self.updates % cfg.video_every == 0) or done):
                        self.write_video()
                    if self.updates % cfg.checkpoint_every == 0 or done:
                        self.save_checkpoint(time.time() - start_time)
                    if done:
                        break
                else:
                    self.epoch, self.position = self.epoch + 1, 0
        finally:
            bar.close()
            self.train_seconds = time.time() - start_time
        if self.logger is not None:
            self.logger.close()
        return self.run_dir

    def update(self, items: dict) -> dict[str, torch.Tensor]:
        """One optimiser step on a collated batch of windows; returns the detached metrics."""
        cfg = self.config
        batch = make_batch(items, cfg.model, self.wm.codec, cfg.reward_field).to(self.rt.device)
        batch = batch.first_steps(cfg.horizon(self.updates))
        self.wm.train()
        with self.rt.autocast():
            start, traj = teacher_forced(self.wm, self.agent, batch)
            open_loop = open_loop_pass(self.wm, start, batch) if cfg.loss.open_loop else None
        shift_target = shift_labels(batch, cfg.model.camera_shift) if cfg.loss.shift else None
        loss, metrics = world_model_loss(start, traj, batch, cfg.loss, shift_target, open_loop)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        average_gradients(self.wm.parameters())
        metrics["losses/grad_norm"] = torch.nn.utils.clip_grad_norm_(self.wm.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        return metrics

    # -- videos ------------------------------------------------------------------------------
    def write_video(self) -> Path | None:
        k = self.config.video_samples
        if k == 0:
            return None
        if (
            self._video_batch is None
        ):  # the same windows every time, spread over the store, unpadded if possible
            picks = full_windows(self.dataset)
            picks = picks[np.linspace(0, len(picks) - 1, min(k, len(picks))).round().astype(int)]
            items = default_collate([self.dataset[int(i)] for i in picks])
            self._video_batch = make_batch(items, self.config.model, self.wm.codec, self.config.reward_field)
        self.wm.eval()
        devices = [self.rt.device] if self.rt.device.type == "cuda" else []
        with torch.random.fork_rng(devices):  # videos sample too; the training stream must not notice
            return prediction_video(
                self.run_dir / "videos" / f"step_{self.updates:08d}.mp4",
                self.wm,
                self.agent,
                self._video_batch.to(self.rt.device),
                self.rt.autocast(),
            )

    # -- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self, wall: float) -> Path | None:
        ranks = gather_on_rank0(rng_state())
        if ranks is None:
            return None
        state = {
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
            "epoch": self.epoch,
            "position": self.position,
            "wall_time": wall,
            "ranks": ranks,
        }
        meta = {
            "step": self.updates,
            "agent_source": self.agent_source,
            "agent_env": self.agent_env,
            "data": str(self.config.data),
            "reward_field": self.config.reward_field,
            "games": self.store.games,
            "train": to_dict(self.config),
        }
        path = self.run_dir / "checkpoints" / f"step_{self.updates:08d}"
        return save_world_model(path, self.wm, self.agent, meta, state, keep=self.config.keep_checkpoints)

    def _restore(self, state: dict) -> None:
        if len(state["ranks"]) != self.world:
            raise ProclabError(
                f"{str(self.run_dir)!r} was trained by {len(state['ranks'])} processes; "
                "resume it with as many"
            )
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates, self.epoch, self.position = (
            int(state["updates"]),
            int(state["epoch"]),
            int(state["position"]),
        )
        self.wall_offset = float(state["wall_time"])
        restore_rng_state(state["ranks"][self.rank])


def train_world_model(
    data: EpisodeStore | str | Path,
    config: WMTrainConfig | str,
    *,
    progress: bool = True,
    **fields: Any,
) -> TrainedWorldModel:
    """Train a world model on the episode store ``data`` in this process; returns it, trained.

    ``config`` is a preset's name (``tiny``, ``small``, ``cpu``, ``paper``: :func:`~.config.wm_size`) or a
    :class:`~.config.WMTrainConfig`; ``fields`` replace its fields (``total_updates=300, time_limit=60,
    run_root=out``), and ``data`` its store. The agent in the loop is the one that recorded the store
    (``agent=CHECKPOINT`` names another). The run directory (config, metrics, checkpoints) is the result's
    :attr:`~.checkpoint.TrainedWorldModel.run_dir`; ``proclab wm train`` trains the same way, on as many
    processes as torchrun starts.
    """
    base = wm_size(config) if isinstance(config, str) else config
    path = data.path if isinstance(data, EpisodeStore) else Path(data)
    trainer = WMTrainer(with_fields(base, **fields, data=path))
    run_dir = trainer.train(progress)
    ckpt = load_checkpoint(find_checkpoint(run_dir), kind=KIND)
    return TrainedWorldModel(trainer.wm.eval(), trainer.agent, ckpt, trainer.rt)
