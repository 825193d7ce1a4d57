"""Several processes of one run: torchrun's process group, rank helpers, gradient averaging, Ray.

Learners that train data-parallel (PPO, the world model) start every rank from rank 0's weights
(:func:`broadcast_parameters`), average gradients before each optimiser step
(:func:`average_gradients`) and write one run directory chosen on rank 0 (:func:`on_rank0`).
Work that scales out to many machines (IMPALA actors, recording workers, T-REX grids) joins a
Ray cluster with :func:`connect_ray`. Every helper is a no-op in a plain single process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist

from proclab.errors import ProclabError
from proclab.run.runtime import Runtime, seed_everything


def join_torchrun(device: str) -> str:
    """Join torchrun's process group when launched by it (NCCL on GPUs, gloo on CPUs).

    Returns the device this rank should use: ``cuda:<LOCAL_RANK>`` with NCCL, else ``device``.
    """
    if "LOCAL_RANK" not in os.environ or dist.is_initialized():
        return device
    backend = "nccl" if torch.cuda.is_available() and device != "cpu" else "gloo"
    dist.init_process_group(backend)
    if backend != "nccl":
        return device
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    return f"cuda:{local}"


def on_rank0(make: Callable[[], Path]) -> Path:
    """``make()`` on rank 0 only, its result shared with every rank (e.g. the run directory)."""
    if not dist.is_initialized():
        return make()
    holder = [str(make()) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(holder, src=0)
    return Path(holder[0])


def gather_on_rank0(local: object) -> list | None:
    """Every rank's ``local`` as a list on rank 0 (``None`` elsewhere), e.g. per-rank RNG states for a checkpoint."""
    if not dist.is_initialized():
        return [local]
    ranks = [None] * dist.get_world_size()
    dist.gather_object(local, ranks if dist.get_rank() == 0 else None, dst=0)
    return ranks if dist.get_rank() == 0 else None


def out_of_time(deadline: float | None, world: int = 1, device: torch.device | str = "cpu") -> bool:
    """Whether ``deadline`` (a ``time.time()`` value; None: never) has passed. Under torchrun,
    rank 0's clock decides for every rank, so that all of them stop after the same update
    (``device``: where the process group's backend takes tensors, CUDA for NCCL)."""
    late = deadline is not None and time.time() >= deadline
    if world > 1 and deadline is not None:
        flag = torch.tensor([float(late)], device=device)
        dist.broadcast(flag, 0)
        late = bool(flag.item())
    return late


def deadline(time_limit: float) -> float | None:
    """When a run given ``time_limit`` seconds from now stops (a ``time.time()`` value; 0 s: never)."""
    return time.time() + time_limit if time_limit > 0 else None


def rank_and_world() -> tuple[int, int]:
    """``(rank, world size)`` under torchrun, ``(0, 1)`` in a plain process."""
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def start_training(config) -> tuple[int, int, Runtime]:
    """This process's ``(rank, world size, runtime)`` in a data-parallel training run (PPO, world model):
    ``config`` is checked for the world size (its ``validate``), and every rank is seeded alike so that
    all start from the same initial weights."""
    rank, world = rank_and_world()
    config.validate(world)
    runtime = config.runtime()
    seed_everything(config.seed)
    return rank, world, runtime


def broadcast_parameters(module: torch.nn.Module) -> None:
    """Copy rank 0's parameters to every rank, so data-parallel replicas start identical."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        for p in module.parameters():
            dist.broadcast(p.data, 0)


def average_gradients(params: Iterable[torch.nn.Parameter]) -> None:
    """Average the gradients of ``params`` over torchrun processes (one flat all-reduce).

    A no-op in a single process. Every learner that trains under torchrun (PPO, the world model)
    calls it between ``backward`` and the optimiser step.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    grads = [p.grad for p in params if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def check_replicas(module: torch.nn.Module) -> None:
    """All ranks must hold the same weights (averaged gradients, same optimiser steps)."""
    flat = torch.cat([p.detach().float().reshape(-1) for p in module.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, 0)
    diff = (flat - reference).abs().max()
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    if float(diff) > 0:
        raise RuntimeError(f"replicas diverged across ranks (max weight difference {float(diff):.3g})")


def train_on_ranks(
    trainer_class, config, resume_dir: Path | None, new_run_dir: Callable, report: Callable
) -> None:
    """Run ``trainer_class(config, run_dir=..., resume=...).train()`` in this process, or as one rank
    of a torchrun job: every rank writes to the run directory rank 0 creates, and rank 0 calls
    ``report(trainer, run_dir)``. ``config`` is a frozen dataclass with ``device`` and ``validate(world)``;
    the trainer has ``close()``, called before the process group is destroyed, so that no env or thread of the
    run is left for interpreter exit.
    """
    config = replace(config, device=join_torchrun(config.device))
    run_dir = resume_dir
    if dist.is_initialized() and resume_dir is None:  # every rank writes to rank 0's run directory
        config.validate(dist.get_world_size())
        run_dir = on_rank0(lambda: new_run_dir(config))
    trainer = None
    try:
        trainer = trainer_class(config, run_dir=run_dir, resume=resume_dir is not None)
        out = trainer.train()
        if trainer.rank == 0:
            report(trainer, out)
    finally:
        if trainer is not None:
            trainer.close()
        if dist.is_initialized():
            dist.destroy_process_group()


def connect_ray(address: str, local_cpus: int | None = None):
    """Import Ray and join the cluster at ``address`` (``auto``, ``ray://HOST:10001``, ...).

    ``local`` starts a throw-away cluster on this machine with ``local_cpus`` CPUs (tests, laptops).
    Returns the ``ray`` module, so callers need no import of their own.
    """
    try:
        # lazy: optional (proclab[distributed]), only --ray-address needs it
        import ray
    except ImportError:
        raise ProclabError("--ray-address needs Ray: pip install 'proclab[distributed]'") from None
    if address == "local":
        ray.init(num_cpus=local_cpus, include_dashboard=False)
    else:
        ray.init(address=address)
    return ray
