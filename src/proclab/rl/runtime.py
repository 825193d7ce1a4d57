"""Where and how tensors are computed: device, precision, threads, seeding.

proclab defaults to the fastest path that does not change results beyond tolerance:
channels-last convolutions everywhere, and bf16 autocast where the hardware runs bf16 natively
(CUDA GPUs of compute capability >= 8, and CPUs with AVX-512 BF16 or AMX), fp32 elsewhere. Losses and
log-probabilities are always computed in fp32 on top of the autocast region. In fp32 on a CPU,
learners run forward/backward passes on cache-sized pieces of a minibatch (``compute_chunk``).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from proclab.errors import ProclabError, unknown_choice

PRECISIONS = ("auto", "bf16", "fp32")
CPU_COMPUTE_CHUNK = 128  # fp32 samples per learner forward/backward on CPU: fastest of 64..1024 (docs/ppo.md)


@dataclass(frozen=True)
class Runtime:
    device: torch.device
    bf16: bool
    channels_last: bool = True  # NHWC convolutions: about 2x faster than NCHW on CPU, fp32 or bf16
    compute_chunk: int = 0
    """Most samples per forward/backward pass of a learner, for speed only (0 = no limit): fp32
    convolutions on a CPU run ~1.6x faster on 128 samples than on 1024 (activations stay in cache);
    GPUs want whole batches."""

    def autocast(self):
        """Context for forward passes: bf16 autocast when enabled, otherwise a no-op."""
        if not self.bf16:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    def prepare(self, module: torch.nn.Module) -> torch.nn.Module:
        """Move a module to the device, with channels-last convolutions when enabled."""
        module = module.to(self.device)
        if hasattr(module, "channels_last"):
            module.channels_last(self.channels_last)
        elif self.channels_last:
            module = module.to(memory_format=torch.channels_last)
        return module

    def obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        """uint8 (N, 3, 64, 64) from the env -> tensor on the device, keeping channels-last strides."""
        return torch.from_numpy(obs).to(self.device, non_blocking=True)


def cpu_has_native_bf16() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return any(flag in flags for flag in (" avx512_bf16", " amx_bf16"))


def make_runtime(
    device: str = "auto", precision: str = "auto", threads: int = 0, channels_last: bool = True
) -> Runtime:
    if precision not in PRECISIONS:
        raise unknown_choice("precision", precision, PRECISIONS)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ProclabError(f"invalid device {device!r}; use auto, cpu, cuda or cuda:N") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ProclabError(f"device {device!r} requested but CUDA is not available; use --device cpu")
    if threads > 0:
        torch.set_num_threads(threads)
    if precision == "auto":
        if dev.type == "cuda":
            bf16 = torch.cuda.is_bf16_supported()
        else:
            bf16 = cpu_has_native_bf16()
    else:
        bf16 = precision == "bf16"
    if dev.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    # Measured on fp32 CPUs only; the bf16 path keeps whole minibatches as it was measured.
    compute_chunk = CPU_COMPUTE_CHUNK if dev.type == "cpu" and not bf16 else 0
    return Runtime(device=dev, bf16=bf16, channels_last=channels_last, compute_chunk=compute_chunk)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))


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


def rank_and_world() -> tuple[int, int]:
    """``(rank, world size)`` under torchrun, ``(0, 1)`` in a plain process."""
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def broadcast_parameters(module: torch.nn.Module) -> None:
    """Copy rank 0's parameters to every rank, so data-parallel replicas start identical."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        for p in module.parameters():
            dist.broadcast(p.data, 0)


def connect_ray(address: str, local_cpus: int | None = None):
    """Import Ray and join the cluster at ``address`` (``auto``, ``ray://HOST:10001``, ...).

    ``local`` starts a throw-away cluster on this machine with ``local_cpus`` CPUs (tests, laptops).
    Returns the ``ray`` module, so callers need no import of their own.
    """
    try:
        import ray
    except ImportError:
        raise ProclabError("--ray-address needs Ray: pip install 'proclab[distributed]'") from None
    if address == "local":
        ray.init(num_cpus=local_cpus, include_dashboard=False)
    else:
        ray.init(address=address)
    return ray
