"""Where and how tensors are computed: device, precision, threads, seeding, RNG state.

proclab defaults to the fastest path that does not change results beyond tolerance:
channels-last convolutions everywhere, and bf16 autocast where the hardware runs bf16 natively
(CUDA GPUs of compute capability >= 8, and CPUs with AVX-512 BF16 or AMX), fp32 elsewhere. Losses and
log-probabilities are always computed in fp32 on top of the autocast region. How a learner
splits its work on a CPU (pieces of a minibatch, ``compute_chunk``; side by side on workers,
``workers`` and ``acting_workers``) is the layout, chosen by timing when a run starts
(:mod:`proclab.run.layout`); a plain runtime computes whole batches on intra-op threads.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import platform
import random
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

from proclab.errors import ProclabError, unknown_choice
from proclab.run.runtime_flags import RuntimeFlags

ModuleT = TypeVar("ModuleT", bound=torch.nn.Module)

PRECISIONS = ("auto", "bf16", "fp32")


@dataclass(frozen=True)
class Runtime:
    device: torch.device
    bf16: bool
    channels_last: bool = True  # NHWC convolutions: about 2x faster than NCHW on CPU, fp32 or bf16
    compute_chunk: int = 0
    """Most samples per forward/backward pass of a learner, for speed only (0 = no limit): CPU
    convolutions run faster per sample on cache-sized pieces (activations stay in cache); GPUs
    want whole batches."""
    workers: int = 0
    """Threads on which a learner computes its pieces side by side (:meth:`map`), each with one
    intra-op thread (0 = one piece at a time, on all of torch's intra-op threads). On a CPU, one
    single-threaded piece per core keeps every core busy without the per-operation barriers of
    intra-op threads, which stall whenever one of the threads is descheduled (docs/ppo.md)."""
    acting_workers: int = 0
    """Likewise for acting: slices of the envs computed side by side (0 = the whole batch at once)."""

    def map(self, fn: Callable, items: Iterable, workers: int) -> Iterator:
        """``fn`` over ``items``, results in order: side by side on ``workers`` threads, or one
        after another in this thread (``workers`` <= 1). Thread-local torch state (grad mode,
        inference mode, autocast) is not carried into the workers: ``fn`` sets what it needs."""
        if workers <= 1:
            return map(fn, items)
        return _worker_pool(workers).map(fn, items)

    def autocast(self):
        """Context for forward passes: bf16 autocast when enabled, otherwise a no-op."""
        if not self.bf16:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    def prepare(self, module: ModuleT) -> ModuleT:
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


@functools.cache
def _worker_pool(workers: int) -> ThreadPoolExecutor:
    """One pool per size for the whole process; its threads run torch with one intra-op thread."""
    return ThreadPoolExecutor(workers, thread_name_prefix="proclab-worker", initializer=single_threaded)


def single_threaded() -> None:
    """Make this thread compute with one intra-op thread, for good.

    torch sets a thread's intra-op count lazily, at its first parallel operation, to the process-wide count
    of the moment (the last ``set_num_threads`` of any thread), and ``set_num_threads`` before that first
    operation does not count as it. So a worker that set 1 and first computed after the main thread had set
    2 ran on 2: two such workers oversubscribed the cores, and a gradient computed on one of them summed
    differently from the same gradient on the other (bit-equal updates fail). Asking for the count first
    runs the lazy setting now; the 1 that follows then holds.
    """
    torch.get_num_threads()
    torch.set_num_threads(1)


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """This thread computes with ``n`` intra-op threads inside the block, its count before after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def acting_threads(runtime: Runtime, threads: int | None = None) -> int:
    """Intra-op threads for playing an agent: ``threads`` if given, else one on a CPU, torch's own count
    elsewhere. Acting computes one small batch (at most the env slots' frames) per env step, beside procgen's
    stepping threads in the same process: on several intra-op threads each operation waits at a barrier for
    all of them, and on a busy machine for a descheduled one (``benchmarks/rollout_threads.py``: a 32-episode
    rollout with a cache, docs/benchmarks.md)."""
    if threads is not None:
        if threads < 1:
            raise ProclabError(f"threads must be >= 1, got {threads}")
        return threads
    return 1 if runtime.device.type == "cpu" else torch.get_num_threads()


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``; elsewhere what ``platform`` knows), for reports and benchmarks."""
    try:
        with open("/proc/cpuinfo") as f:
            names = re.findall(r"model name\s*:\s*(.+)", f.read())
    except OSError:
        names = []
    return names[0].strip() if names else (platform.processor() or platform.machine())


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
    if dev.type == "cpu":
        # Pins this thread's intra-op count: the workers' set_num_threads(1) would change the
        # default that threads which have not run torch yet start from.
        torch.set_num_threads(torch.get_num_threads())
        keep_freed_memory()
    return Runtime(device=dev, bf16=bf16, channels_last=channels_last)


_MALLOPT = {"M_ARENA_MAX": (-8, 1), "M_MMAP_THRESHOLD": (-3, 1 << 30), "M_TRIM_THRESHOLD": (-1, 1 << 30)}


@functools.cache
def keep_freed_memory() -> bool:
    """Make glibc's allocator keep the memory a CPU computation frees, for the next pass to reuse.

    By default glibc hands blocks over 32 MiB (the activations of a 128-frame piece of the IMPALA CNN)
    straight to the kernel with mmap and returns them on free, trims the heap's free top, and gives each
    worker thread an arena of its own whose large blocks go the same way. Every pass then touches fresh
    pages: on a 2-core AMD EPYC, one learner gradient over 1,024 samples in pieces of 128 took 70,000 to
    110,000 minor page faults (each a trap into the kernel and a zeroed page), and 0 with one arena,
    large blocks from the heap and no trimming; the same gradient ran about 20 % faster (one thread).
    The cost: the process keeps its peak heap. True if glibc took the settings (elsewhere: no-op).
    """
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (macOS, musl): their allocators do as they do
        return False
    return all([mallopt(param, value) == 1 for param, value in _MALLOPT.values()])


@dataclass(frozen=True, kw_only=True)
class RuntimeConfig(RuntimeFlags):
    """The runtime fields of a command (:class:`~proclab.run.runtime_flags.RuntimeFlags`: ``--device``,
    ``--precision``, ``--channels-last``, ``--torch-threads``) and the :class:`Runtime` they describe."""

    def runtime(self) -> Runtime:
        """The :class:`Runtime` these settings describe (sets the thread count as a side effect)."""
        return make_runtime(self.device, self.precision, self.torch_threads, self.channels_last)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))


def rng_state() -> dict:
    """This process's torch RNG streams (CPU and every GPU), for a checkpoint that resumes exactly."""
    return {
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def restore_rng_state(state: dict) -> None:
    """Put back what :func:`rng_state` saved."""
    torch.set_rng_state(state["torch_rng"])
    if torch.cuda.is_available() and state["cuda_rng"]:
        torch.cuda.set_rng_state_all(state["cuda_rng"])
