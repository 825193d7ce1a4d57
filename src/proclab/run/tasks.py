"""Independent units of work run where there is room: in this process, in local processes, or as Ray tasks.

A population's members and a sweep's blocks of levels are units that need nothing from each other: each
writes what it produced to the folder it was given and returns a small result. :func:`run_tasks` runs a
function over such units and hands each result back with the unit's index, as units finish, so that the
caller merges them in a fixed order (never the order of finishing) and the numbers do not depend on where or
when a unit ran.

**Where.** ``ray_address`` (or ``RAY_ADDRESS``): one Ray task per unit, each reserving ``cpus`` CPUs and
``gpus`` GPUs (a fraction shares one); else ``workers`` spawned processes (no torch state shared); else
this process, unit after unit.

**Faults.** A Ray task whose worker process dies (killed, out of memory, its node lost) is run again, up to
``retries`` times, by Ray itself: the other units are untouched, and a unit that writes its output atomically
leaves no half of it. What a unit raises is not retried (it would raise again): it is that unit's outcome,
handed back through its ``get``. A local process killed breaks the pool (``BrokenProcessPool`` for the units
not finished); a unit whose output is saved is then skipped by a second call, which is how a local run resumes.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from proclab.errors import ProclabError
from proclab.run.distributed import connect_ray


@dataclass(frozen=True)
class TaskSettings:
    """Where :func:`run_tasks` runs its units and what each reserves."""

    workers: int = 1
    """Local processes at a time (1: the units run in this process)."""
    ray_address: str | None = None
    """A Ray cluster (``auto``, ``HOST:6379``, ``ray://HOST:10001``, ``local``); default: ``RAY_ADDRESS``, else
    no Ray."""
    cpus: float = 1
    """CPUs Ray reserves for each unit."""
    gpus: float = 0
    """GPUs (or a fraction of one) Ray reserves for each unit."""
    retries: int = 3
    """Times Ray runs a unit again after its worker process died."""

    def address(self) -> str | None:
        """The cluster the units run on: ``ray_address``, else ``RAY_ADDRESS``, else None (no Ray)."""
        return self.ray_address or os.environ.get("RAY_ADDRESS") or None

    def check(self) -> None:
        if self.workers < 1 or self.retries < 0:
            raise ProclabError(
                f"workers must be >= 1 and retries >= 0, got {self.workers} and {self.retries}"
            )
        if self.cpus <= 0 or self.gpus < 0:
            raise ProclabError(f"CPUs per task must be > 0 and GPUs >= 0, got {self.cpus} and {self.gpus}")

    def threads(self) -> int:
        """Torch threads a unit computes on: the CPUs Ray reserved for it, or the cores shared by the local
        workers (never fewer than one)."""
        if self.address():
            return max(1, int(self.cpus))
        return max(1, (os.cpu_count() or 1) // self.workers)

    def unit_threads(self, given: int) -> int:
        """Torch threads of each unit: ``given`` (a ``--torch-threads``), else, where units run side by side
        (local workers, Ray), its share of the cores (:meth:`threads`: not every core in every unit), else 0
        (torch's default: the units run one after another here)."""
        if given or not (self.address() or self.workers > 1):
            return given
        return self.threads()


Done = tuple[int, Callable[[], Any]]
"""A finished unit: its index among the units and ``get()``, which returns its result or raises what ended it."""


def run_tasks(
    fn: Callable[[Any], Any], units: Sequence, settings: TaskSettings = TaskSettings()
) -> Iterator[Done]:
    """``fn(unit)`` for every unit of ``units``, where ``settings`` says (module docstring), yielded as the
    units finish. ``fn`` must be a module-level function and the units picklable (they travel to processes
    and nodes)."""
    settings.check()
    address = settings.address()
    if address:
        yield from _on_ray(fn, units, address, settings)
    elif settings.workers > 1 and len(units) > 1:
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(settings.workers, len(units)), mp_context=spawn) as pool:
            futures = {pool.submit(fn, unit): i for i, unit in enumerate(units)}
            for future in as_completed(futures):
                yield futures[future], future.result
    else:
        for i, unit in enumerate(units):
            yield i, _called(fn, unit)


def _called(fn: Callable[[Any], Any], unit: Any) -> Callable[[], Any]:
    """``fn(unit)`` run now, its result or exception kept for ``get()``."""
    try:
        value = fn(unit)
    except Exception as err:
        return _raising(err)
    return lambda: value


def _on_ray(
    fn: Callable[[Any], Any], units: Sequence, address: str, settings: TaskSettings
) -> Iterator[Done]:
    """One Ray task per unit on the cluster at ``address``; a ProclabError a task raised comes back as itself."""
    ray = connect_ray(address, local_cpus=max(1, int(settings.cpus)) * max(1, settings.workers))
    try:
        task = ray.remote(num_cpus=settings.cpus, num_gpus=settings.gpus, max_retries=settings.retries)(fn)
        pending = {task.remote(unit): i for i, unit in enumerate(units)}
        while pending:
            (ready,), _ = ray.wait(list(pending), num_returns=1)
            yield pending.pop(ready), _fetch(ray, ready)
    finally:
        ray.shutdown()


def _fetch(ray, ref) -> Callable[[], Any]:
    """``get()`` of a finished task: its result, a ProclabError it raised as one line, else Ray's error."""
    try:
        value = ray.get(ref)
    except ray.exceptions.RayTaskError as err:
        cause = err.cause if isinstance(err.cause, ProclabError) else err
        return _raising(cause)
    except ray.exceptions.RayError as err:  # the task's worker died more often than it may be retried
        return _raising(err)
    return lambda: value


def _raising(error: BaseException) -> Callable[[], Any]:
    """``get()`` of a unit that ended with ``error``."""

    def fail() -> Any:
        raise error

    return fail
