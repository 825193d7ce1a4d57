"""How a CPU learner splits its work: the layout, chosen by timing it, cached per CPU and agent.

A learner's forward/backward passes can run on a whole minibatch or on pieces of it (IMPALA-CNN
activations of 64 frames stay in cache, those of 2048 do not), and on torch's intra-op threads
(one piece at a time, all cores on it) or on workers (one single-threaded piece per core, side by
side, no per-operation barriers). Acting has the same choice for its batch of envs. Which is
fastest depends on the CPU, the precision, the load and the agent: bf16 on a CPU with native
bf16 wants pieces of 64 on intra-op threads, fp32 on a loaded AVX2 machine wants workers. So the
layout is not a constant: :func:`choose_layout` times the candidates on the agent and batch at hand
when a run starts (a few seconds) and keeps the fastest in a small JSON cache
(``$XDG_CACHE_HOME/proclab/layouts.json``), keyed by CPU model, precision, threads, torch
version, agent shape and batch sizes, so later runs skip the timing. A layout changes only the
order of floating-point sums, never what is computed.

The fastest layout also depends on the load, which changes while a run goes on: intra-op threads,
the fastest on a quiet CPU, meet at a barrier after every operation and lose 3-15x to workers when
another process takes a core. :class:`PaceWatch` notices when a run's updates depart from the pace
they settled at, so the run can time its layout again.

Written as ``PIECE:SCHEME,acting:SCHEME`` (``--learner-layout``): ``64:intra,acting:intra``,
``128:workers,acting:workers``, ``whole:intra`` (acting then takes the learner's scheme).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from proclab.errors import ProclabError
from proclab.io.files import user_cache, write_json
from proclab.run.runtime import Runtime

SCHEMES = ("intra", "workers")
CHOICES = ("auto", "measure")
"""``--learner-layout`` values that choose by timing: ``auto`` reads the cache first, ``measure``
times again and replaces the cached choice (after a change of load or of machine)."""
CACHE_VERSION = 1


@dataclass(frozen=True)
class Layout:
    piece: int = 0
    """Samples per learner forward/backward pass (0: the whole minibatch)."""
    learner: str = "intra"
    """intra: one pass at a time on torch's intra-op threads; workers: one piece per core side by side."""
    acting: str = "intra"
    """The acting forward pass: whole batch on intra-op threads, or one slice of envs per worker."""

    def __str__(self) -> str:
        return f"{self.piece or 'whole'}:{self.learner},acting:{self.acting}"

    @classmethod
    def parse(cls, spec: str) -> Layout:
        """``PIECE:SCHEME[,acting:SCHEME]``; a bad spec is one line naming what would be valid."""
        usage = (
            f"invalid learner layout {spec!r}; use auto, measure or PIECE:SCHEME[,acting:SCHEME] with PIECE "
            "whole or a sample count and SCHEME intra or workers (e.g. 64:intra,acting:workers)"
        )
        learner, _, acting = spec.strip().partition(",")
        piece, _, scheme = learner.partition(":")
        if acting:
            name, _, acting = acting.partition(":")
            if name != "acting":
                raise ProclabError(usage)
        acting = acting or scheme
        if scheme not in SCHEMES or acting not in SCHEMES:
            raise ProclabError(usage)
        if piece == "whole":
            size = 0
        elif piece.isdigit() and int(piece) > 0:
            size = int(piece)
        else:
            raise ProclabError(usage)
        if size == 0 and scheme == "workers":
            raise ProclabError(f"{usage}; workers compute pieces side by side, so give a piece size")
        return cls(size, scheme, acting)

    def apply(self, rt: Runtime, threads: int) -> Runtime:
        """``rt`` computing this way with ``threads`` cores (workers need two or more)."""
        if rt.device.type != "cpu" and "workers" in (self.learner, self.acting):
            raise ProclabError(f"learner layout {str(self)!r}: workers are for CPUs; use whole:intra")
        side = threads if threads > 1 else 0
        return dataclasses.replace(
            rt,
            compute_chunk=self.piece,
            workers=side if self.learner == "workers" else 0,
            acting_workers=side if self.acting == "workers" else 0,
        )


def validate_layout(spec: str) -> None:
    """Refuse a bad ``--learner-layout`` before anything runs."""
    if spec not in CHOICES:
        Layout.parse(spec)


@dataclass(frozen=True)
class Timings:
    """Wall seconds per sample of each candidate: learner ``(piece, scheme)`` and acting ``scheme``."""

    learner: dict[tuple[int, str], float]
    acting: dict[str, float]

    def fastest(self) -> Layout:
        piece, scheme = min(self.learner, key=self.learner.__getitem__)
        return Layout(piece, scheme, min(self.acting, key=self.acting.__getitem__))

    def as_json(self) -> dict:
        return {
            "learner_ms_per_sample": {
                f"{p or 'whole'}:{s}": round(v * 1e3, 4) for (p, s), v in self.learner.items()
            },
            "acting_ms_per_sample": {s: round(v * 1e3, 4) for s, v in self.acting.items()},
        }


def layout_key(cpu: str, precision: str, threads: int, torch_version: str, agent: dict, **batch: int) -> str:
    """The cache key: what the fastest layout depends on. The agent's config is hashed (its shape)."""
    digest = hashlib.sha1(json.dumps(agent, sort_keys=True).encode()).hexdigest()[:12]
    sizes = " ".join(f"{k} {v}" for k, v in sorted(batch.items()))
    return f"{cpu} | {precision} | {threads} threads | torch {torch_version} | agent {digest} | {sizes}"


def cache_path() -> Path:
    """``layouts.json`` in proclab's cache (``$XDG_CACHE_HOME/proclab``, ``~/.cache`` when unset)."""
    return user_cache("layouts.json")


class LayoutCache:
    """The chosen layouts on disk. A cache never stops a run: an unreadable or corrupt file is
    ignored with a warning (and replaced by the next write), a failed write only warns."""

    def __init__(self, path: Path | None = None):
        self.path = path or cache_path()

    def _entries(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
            if data.get("version") != CACHE_VERSION or not isinstance(data.get("layouts"), dict):
                raise ValueError(f"not a version-{CACHE_VERSION} layout cache")
            return data["layouts"]
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, AttributeError) as err:  # JSONDecodeError is a ValueError
            warnings.warn(
                f"ignoring the layout cache {str(self.path)!r} ({err}); it will be rewritten", stacklevel=2
            )
            return {}

    def get(self, key: str) -> Layout | None:
        entry = self._entries().get(key)
        if entry is None:
            return None
        try:
            return Layout.parse(entry["layout"])
        except (ProclabError, TypeError, KeyError) as err:
            warnings.warn(f"ignoring a bad entry of the layout cache {str(self.path)!r}: {err}", stacklevel=2)
            return None

    def put(self, key: str, layout: Layout, timings: Timings) -> None:
        entries = self._entries()
        entries[key] = {
            "layout": str(layout),
            "measured": datetime.now(UTC).isoformat(timespec="seconds"),
            **timings.as_json(),
        }
        try:
            write_json(self.path, {"version": CACHE_VERSION, "layouts": entries}, "layout cache")
        except (OSError, ProclabError) as err:
            warnings.warn(f"could not save the layout cache {str(self.path)!r}: {err}", stacklevel=2)


@dataclass(frozen=True)
class Choice:
    layout: Layout
    how: str
    """Where it came from, for the run's printout: given, cached, or measured (and how long it took)."""
    timings: Timings | None = None


def choose_layout(spec: str, key: str, measure: Callable[[], Timings], cache: LayoutCache) -> Choice:
    """The layout ``spec`` asks for: itself when explicit, else the cached choice for ``key``
    (``auto``) or the fastest of ``measure()``'s timings, which is then cached."""
    if spec not in CHOICES:
        return Choice(Layout.parse(spec), "given")
    if spec == "auto":
        cached = cache.get(key)
        if cached is not None:
            return Choice(cached, f"cached in {cache.path}")
    start = time.perf_counter()
    timings = measure()
    layout = timings.fastest()
    cache.put(key, layout, timings)
    return Choice(layout, f"measured in {time.perf_counter() - start:.1f} s, cached in {cache.path}", timings)


class PaceWatch:
    """Whether a run should time its layout again: its updates have left the pace they settled at.

    After a layout is set, the first update is a warm-up and the median of the next ``settle`` sets the
    pace. From then on an update that takes over ``factor`` times the pace, or under 1/``factor`` of it,
    has departed; ``patience`` departures in a row in the same direction (one slow update is a hiccup,
    three are a new load) with updates of at least ``min_seconds`` (a re-timing costs about a second on
    an idle CPU and tens under load; short updates are noise) answer True once, and the watch starts
    over for the layout that follows. So a run re-times at most once per ``1 + settle + patience``
    updates, and never while its load holds still.
    """

    def __init__(self, factor: float = 1.5, patience: int = 3, settle: int = 3, min_seconds: float = 2.0):
        if factor <= 1 or patience < 1 or settle < 1:
            raise ValueError("PaceWatch needs factor > 1, patience >= 1 and settle >= 1")
        self.factor, self.patience, self.settle, self.min_seconds = factor, patience, settle, min_seconds
        self.reset()

    def reset(self) -> None:
        """Forget the pace (a new layout settles its own)."""
        self.settling: list[float] = []
        self.pace: float | None = None
        self.streak = 0

    def observe(self, seconds: float) -> bool:
        """One update's wall seconds; True when the layout should be timed again."""
        if self.pace is None:
            self.settling.append(seconds)
            if len(self.settling) > self.settle:
                self.pace = statistics.median(self.settling[1:])
            return False
        ratio = seconds / self.pace
        direction = 1 if ratio > self.factor else -1 if ratio < 1 / self.factor else 0
        if direction == 0 or self.streak * direction < 0:
            self.streak = direction
        else:
            self.streak += direction
        if abs(self.streak) >= self.patience and max(seconds, self.pace) >= self.min_seconds:
            self.reset()
            return True
        return False
