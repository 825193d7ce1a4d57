"""A progress bar over an analysis' phases that also times each phase (for summary.json)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)


class Phases:
    """``with phases.phase("ward"): ...`` shows the phase, advances the bar and records its seconds."""

    def __init__(self, bar, task):
        self._bar, self._task = bar, task
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._bar.update(self._task, description=name)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(time.perf_counter() - start, 3)
            self._bar.advance(self._task)

    def fraction(self, done: int, total: int) -> None:
        """Progress inside the current phase (e.g. replayed steps), shown as a percentage."""
        name = self._bar.tasks[self._task].description.split(" (")[0]
        self._bar.update(self._task, description=f"{name} ({100 * done // max(total, 1)} %)")


@contextmanager
def no_phase(name: str) -> Iterator[None]:
    """A phase that shows and times nothing: what an analysis function runs its phases under when the
    caller (a notebook) passes no progress bar's ``phase``."""
    yield


@contextmanager
def phases(total: int, title: str) -> Iterator[Phases]:
    columns = (
        SpinnerColumn(),
        TextColumn(f"{title}: " + "{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, transient=True) as bar:
        yield Phases(bar, bar.add_task("starting", total=total))
