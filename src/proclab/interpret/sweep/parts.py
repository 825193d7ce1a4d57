"""A sweep played in parts: the paired levels split into blocks, each played and saved on its own.

A study's sweep is hours of play (321 variants on 1,000 levels is about 48M steps, some 6 core-hours on
a CPU). With ``--parts N`` the levels are split into ``N`` blocks and each block's outcomes are saved in
``ANALYSIS/sweep-parts/`` as soon as it is played: run the same command again after a crash or the end
of a session and it plays only the blocks not yet saved. ``--part I`` plays block ``I`` alone, so that
one process per core plays its own block. The tests run once, on all blocks together, when the last
block is saved.

**Why the blocks make the same sweep.** Every variant of a level plays in the level's block, beside its
baseline, so the pairing is kept; the arms' held values are drawn for all levels before the split;
sampled actions are keyed by (seed, level, step). So the outcomes of every whole-episode arm and of
the brief ones are the same however the levels are split. Two draws are not: ``resample-step``'s value
at every step and the landing reservoirs come from the block's own seed (:func:`block_seed`), and the
reservoirs of the blocks are merged by weight (:meth:`Reservoirs.merged`).

**Blocks of another sweep are refused.** The first block saved writes a fingerprint of what the
outcomes depend on (the options, the basis digest, the checkpoint, the levels); every later run
checks it and names the options that differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from proclab.interpret.interventions.batched_play import Outcomes
from proclab.interpret.sweep.landing import Reservoirs
from proclab.run.parts import Parts as UnitParts
from proclab.run.parts import joined


def block_seed(seed: int, block: int) -> int:
    """The seed of block ``block``'s own draws: ``seed`` itself for the first block (a sweep in one part
    draws as it did before parts existed), a ``SeedSequence`` child of ``(seed, block)`` for the others."""
    return seed if block == 0 else int(np.random.SeedSequence([seed, block]).generate_state(1)[0])


@dataclass(frozen=True)
class Played:
    """What one block produced: the outcomes ``(V, levels of the block)``, each episode's cause of death
    as if it died (None without the watcher), the landing reservoirs (None when not measured), the
    seconds of play and whether each episode reached each of the game's two goals (None when not tracked)."""

    outcomes: Outcomes
    cause: np.ndarray | None
    reservoirs: Reservoirs | None
    seconds: float
    goals: np.ndarray | None = None  # (2, V, levels of the block): each goal reached (None: not tracked)

    def arrays(self) -> dict[str, np.ndarray]:
        out = self.outcomes.arrays()
        out["seconds"] = np.array(self.seconds)
        if self.cause is not None:
            out["cause"] = self.cause
        if self.goals is not None:
            out["goals"] = self.goals
        return {**out, **({} if self.reservoirs is None else self.reservoirs.arrays())}

    @classmethod
    def from_arrays(cls, f, cap: int, seed: int) -> Played:
        reservoirs = None
        if "landing_dims" in f:
            reservoirs = Reservoirs.from_arrays(f, cap, np.random.default_rng([seed, 23]))
        return cls(
            Outcomes.of_arrays(f),
            np.asarray(f["cause"]) if "cause" in f else None,
            reservoirs,
            float(f["seconds"]),
            np.asarray(f["goals"]) if "goals" in f else None,
        )


def concatenate(played: list[Played], cap: int, seed: int) -> Played:
    """The blocks as one, along the levels, in block order (the merged reservoirs drawn with ``seed``)."""
    return Played(
        Outcomes.concatenate([p.outcomes for p in played]),
        joined([p.cause for p in played], lambda causes: np.concatenate(causes, axis=1)),
        joined(
            [p.reservoirs for p in played],
            lambda kept: Reservoirs.merged(kept, cap, np.random.default_rng([seed, 29])),
        ),
        sum(p.seconds for p in played),
        joined([p.goals for p in played], lambda goals: np.concatenate(goals, axis=2)),
    )


class Parts(UnitParts):
    """The blocks of one sweep (:class:`~proclab.run.parts.Parts` of :class:`Played`), kept in memory (``folder``
    None: a sweep in one process) or saved as ``part-I-of-N.npz`` in ``folder`` with the sweep's ``fingerprint``."""

    def __init__(self, count: int, folder: Path | None = None, fingerprint: dict | None = None):
        super().__init__(count, folder, fingerprint, job="sweep")

    def save(self, i: int, played: Played) -> None:
        self.keep(i, played, Played.arrays)

    def load(self, i: int, cap: int, seed: int) -> Played:
        return self.value(i, lambda f: Played.from_arrays(f, cap, seed))

    def everything(self, cap: int, seed: int) -> Played:
        """All blocks as one (:func:`concatenate`)."""
        return concatenate([self.load(i, cap, seed) for i in range(self.count)], cap, seed)
