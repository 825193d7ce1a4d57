"""A long job's independent units kept apart: each saved as soon as it is done, and only the missing ones run.

A sweep's or a steering's blocks of levels and an evaluation's agents are units that need nothing from each
other. :class:`Parts` keeps what each unit produced: in memory for a job done in one go, or as
``part-I-of-N.npz`` in a folder, written atomically beside the job's *fingerprint* (what the units' outputs
depend on), so that the same call again after a crash does only the units not yet saved, and a folder of
another job (other options, another agent) is refused in one line naming what differs. :func:`run_parts`
runs the missing units where :class:`~proclab.run.tasks.TaskSettings` says (this process, local processes,
Ray tasks) and hands each result back by its index as it arrives; the caller merges them in unit order, so
the numbers do not depend on where or when a unit ran.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from proclab.errors import ProclabError
from proclab.io.progress import analysis_phases
from proclab.io.run_dirs import write_json_atomic
from proclab.run.tasks import TaskSettings, run_tasks

FINGERPRINT = "fingerprint.json"
T = TypeVar("T")


def digest(*arrays: np.ndarray | bytes) -> str:
    """sha256 of ``arrays`` (their bytes, in order): a fingerprint's entry for levels or weights."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(a if isinstance(a, bytes) else np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def joined(values: Sequence[T | None], join: Callable[[list[T]], T]) -> T | None:
    """What the units hold of one optional output, merged by ``join`` (in unit order); None where they hold none
    (an output measured in one unit is measured in all: the same settings made them)."""
    present = [v for v in values if v is not None]
    return join(present) if present else None


def blocks(levels: int, parts: int) -> list[np.ndarray]:
    """The level indices of each of ``parts`` contiguous blocks of ``levels`` (sizes differ by at most 1)."""
    if not 1 <= parts <= levels:
        raise ProclabError(f"--parts must be between 1 and the number of levels ({levels}), got {parts}")
    return np.array_split(np.arange(levels), parts)


class Parts:
    """The ``count`` units of one job (``job`` names it in messages): kept in memory (``folder`` None) or saved
    as ``part-I-of-N.npz`` (arrays by name) in ``folder`` with the job's ``fingerprint``."""

    def __init__(
        self, count: int, folder: Path | None = None, fingerprint: dict | None = None, job: str = "job"
    ):
        self.count, self.folder, self.job = count, folder, job
        self.kept: dict[int, Any] = {}
        if folder is not None:
            self._check(fingerprint or {})

    def _check(self, fingerprint: dict) -> None:
        assert self.folder is not None
        path = self.folder / FINGERPRINT
        if path.is_file():
            saved = json.loads(path.read_text())
            differ = sorted(k for k in {*saved, *fingerprint} if saved.get(k) != fingerprint.get(k))
            if differ:
                raise ProclabError(
                    f"{self.folder} holds the parts of another {self.job} ({', '.join(differ)} differ): run "
                    "with the same options, or remove that folder to start again"
                )
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, fingerprint)

    def file(self, i: int) -> Path:
        """Where unit ``i`` (0-based) is saved."""
        assert self.folder is not None
        return self.folder / f"part-{i + 1:04d}-of-{self.count:04d}.npz"

    def saved(self) -> set[int]:
        """The units done: kept, or saved in the folder."""
        if self.folder is None:
            return set(self.kept)
        return {i for i in range(self.count) if self.file(i).is_file()}

    def missing(self) -> list[int]:
        """The units still to do, in order."""
        return sorted(set(range(self.count)) - self.saved())

    def complete(self) -> bool:
        return len(self.saved()) == self.count

    def keep(self, i: int, value: Any, arrays: Callable[[Any], Mapping[str, np.ndarray]] = dict) -> None:
        """Unit ``i``'s ``value``: kept as it is in memory, else its ``arrays(value)`` saved atomically."""
        if self.folder is None:
            self.kept[i] = value
            return
        tmp = self.folder / f".part-{i + 1:04d}.tmp.npz"
        np.savez(tmp, **arrays(value))
        tmp.replace(self.file(i))

    def read(self, i: int) -> dict[str, np.ndarray]:
        """The arrays unit ``i`` saved."""
        with np.load(self.file(i)) as f:
            return dict(f)

    def value(self, i: int, of_arrays: Callable[[dict[str, np.ndarray]], Any] = dict) -> Any:
        """Unit ``i``'s value: the one kept, or ``of_arrays`` of what it saved."""
        return self.kept[i] if self.folder is None else of_arrays(self.read(i))

    def run(
        self,
        fn: Callable[[Any], Any],
        unit: Callable[[int], Any],
        where: TaskSettings,
        *,
        arrays: Callable[[Any], Mapping[str, np.ndarray]] = dict,
        of_arrays: Callable[[dict[str, np.ndarray]], Any] = dict,
        title: str = "parts",
        label: str | None = None,
        progress: bool = True,
    ) -> list[Any]:
        """``fn(unit(i))`` for every unit ``i`` not yet done, where ``where`` says (:func:`run_parts`), each result
        kept as it comes back (:meth:`keep`, with ``arrays``); then every unit's value, in unit order
        (:meth:`value`, with ``of_arrays``). The units are made only for the missing (a unit may carry much)."""
        missing = [(i, unit(i)) for i in self.missing()]
        run_parts(
            fn,
            missing,
            where,
            done=lambda i, value: self.keep(i, value, arrays),
            title=title,
            label=label or f"{len(missing)} of {self.count} {self.job} units",
            progress=progress,
        )
        return [self.value(i, of_arrays) for i in range(self.count)]


def fingerprint_of(fields: Mapping[str, Any], unplayed: Iterable[str], **extra: Any) -> dict[str, str]:
    """A job's fingerprint: its options (``fields``) but those that do not change its outputs (``unplayed``:
    where and how fast the units run), as text, with ``extra`` entries (a digest of the levels, the agent)."""
    skip = set(unplayed)
    return {
        **{k: str(v) for k, v in fields.items() if k not in skip},
        **{k: str(v) for k, v in extra.items()},
    }


def run_parts(
    fn: Callable[[Any], Any],
    units: Sequence[tuple[int, Any]],
    where: TaskSettings,
    *,
    done: Callable[[int, Any], None] | None = None,
    title: str = "parts",
    label: str | None = None,
    progress: bool = True,
) -> None:
    """``fn(unit)`` for every ``(index, unit)`` of ``units`` as a unit of :func:`~proclab.run.tasks.run_tasks`,
    each result handed to ``done(index, result)`` as it arrives (to keep it: :meth:`Parts.keep`). A unit that
    fails does not stop the others: the first failure is raised once they are done, so that what finished is
    kept and a second call does only what is still missing. The bar (``title``, or the one a caller holds open)
    shows ``label`` (default: how many units)."""
    failed: list[Exception] = []
    with analysis_phases(progress, 1, title) as ph, ph.phase(label or f"{len(units)} units"):
        for n, (k, get) in enumerate(run_tasks(fn, [u for _, u in units], where), start=1):
            try:
                result = get()
            except Exception as err:
                failed.append(err)
            else:
                if done is not None:
                    done(units[k][0], result)
            ph.fraction(n, len(units))
    if failed:
        raise failed[0]
