"""A progress bar over an analysis' phases that also times each phase (for summary.json).

One convention for every analysis of ``proclab.analyze``: ``progress=True`` shows its phases on the console
(a rich bar, as the commands show theirs), ``progress=False`` shows nothing. An analysis opens its phases with
:func:`analysis_phases`; a command opens its own bar with :func:`phases`, and while that bar is open the
analyses it calls show their phases on it (rich shows one live display at a time), so that the command's bar
counts and times them beside its own (reading, writing) and its ``summary.json`` holds every phase's seconds.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)


def console() -> Console:
    """The console every progress bar of proclab draws on: rich's own, except in a Jupyter kernel without
    ipywidgets, where rich would print a warning at every bar (it draws live bars there with widgets): a plain
    stream then, on which a bar shows nothing while it runs (and nothing at all once a transient one ends)."""
    shown = Console()
    if shown.is_jupyter and importlib.util.find_spec("ipywidgets") is None:
        return Console(force_jupyter=False, force_terminal=False)
    return shown


def progress_bar(*columns, **options) -> Progress:
    """A rich progress bar (``Progress(*columns, **options)``) on :func:`console`."""
    return Progress(*columns, console=console(), **options)


class Phases:
    """``with phases.phase("ward"): ...`` shows the phase, advances the bar and records its seconds; without a
    bar (``progress=False``) it records the seconds alone."""

    def __init__(self, bar=None, task=None):
        self._bar, self._task = bar, task
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self._bar is not None:
            self._bar.update(self._task, description=name)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(time.perf_counter() - start, 3)
            if self._bar is not None:
                self._bar.advance(self._task)

    def fraction(self, done: int, total: int) -> None:
        """Progress inside the current phase (e.g. replayed steps), shown as a percentage."""
        if self._bar is None:
            return
        name = self._bar.tasks[self._task].description.split(" (")[0]
        self._bar.update(self._task, description=f"{name} ({100 * done // max(total, 1)} %)")

    def counter(self, total: int) -> Callable[..., None]:
        """A function that counts ``n`` (default 1) more of the ``total`` units of the current phase done (played
        episodes, attributed windows) and shows the share done (:meth:`fraction`)."""
        done = 0

        def count(n: int = 1) -> None:
            nonlocal done
            done += n
            self.fraction(done, total)

        return count


_open: ContextVar[Phases | None] = ContextVar("proclab_phases", default=None)
"""The bar a command holds open, which the analyses it calls show their phases on."""


@contextmanager
def phases(total: int, title: str) -> Iterator[Phases]:
    """A bar of ``total`` phases titled ``title`` (a command's, or an analysis' of its own)."""
    columns = (
        SpinnerColumn(),
        TextColumn(f"{title}: " + "{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with progress_bar(*columns, transient=True) as progress:
        shown = Phases(progress, progress.add_task("starting", total=total))
        token = _open.set(shown)
        try:
            yield shown
        finally:
            _open.reset(token)


@contextmanager
def analysis_phases(progress: bool, total: int, title: str) -> Iterator[Phases]:
    """The phases of an analysis called with ``progress`` (module docstring): on the bar a command holds open,
    else on a bar of their own (``total`` phases, ``title``); shown nowhere when ``progress`` is False."""
    shown = _open.get()
    if not progress:
        yield Phases()
    elif shown is not None:
        yield shown
    else:
        with phases(total, title) as own:
            yield own
