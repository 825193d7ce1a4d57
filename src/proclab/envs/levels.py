"""Level splits: which Procgen levels an environment may draw from.

A Procgen environment with ``num_levels = n > 0`` and ``start_level = s`` draws each episode's
level uniformly from ``[s, s + n)``; ``num_levels = 0`` draws from all 2^31 level seeds. A
:class:`LevelSplit` is that pair as a first-class value with a name, so that runs can say
"trained on ``train``, tested on ``test1``" and proclab can check the two never share a level.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

import numpy as np

from proclab.errors import ProclabError, ProclabWarning, unknown_choice

LEVEL_SEED_SPACE = 2**31  # Procgen level seeds are non-negative int32


@dataclass(frozen=True)
class LevelSplit:
    """Levels ``[start, start + num)``; ``num == 0`` means unbounded (every level)."""

    start: int = 0
    num: int = 0
    name: str = ""

    def __post_init__(self):
        if self.start < 0 or self.num < 0:
            raise ProclabError(
                f"level split start={self.start}, num={self.num} is invalid: both must be >= 0."
            )
        if self.start + self.num > LEVEL_SEED_SPACE:
            raise ProclabError(
                f"level split [{self.start}, {self.start + self.num}) exceeds the level-seed space "
                f"[0, {LEVEL_SEED_SPACE})."
            )
        if self.num == 0 and self.start != 0:
            raise ProclabError(
                f"unbounded level split must start at 0 (got start={self.start}); "
                "give num > 0 for a bounded range."
            )

    @property
    def bounded(self) -> bool:
        return self.num > 0

    @property
    def stop(self) -> int:
        return self.start + self.num if self.bounded else LEVEL_SEED_SPACE

    def __contains__(self, level_seed: int) -> bool:
        return self.start <= int(level_seed) < self.stop

    def overlaps(self, other: LevelSplit) -> bool:
        """True if some level belongs to both splits (unbounded splits contain every level)."""
        return self.start < other.stop and other.start < self.stop

    def label(self) -> str:
        rng = f"[{self.start}, {self.stop})" if self.bounded else "all levels"
        return f"{self.name} {rng}" if self.name else rng

    def __str__(self) -> str:
        return self.name or (f"{self.start}:{self.num}" if self.bounded else "all")


NAMED_SPLITS: dict[str, LevelSplit] = {
    s.name: s
    for s in (
        LevelSplit(0, 200, "train"),  # Procgen paper easy / modern-srwm / T-REX
        LevelSplit(0, 500, "train-500"),  # Procgen paper hard
        LevelSplit(500, 200, "val"),  # modern-srwm validation split
        LevelSplit(1000, 200, "test1"),  # modern-srwm test splits
        LevelSplit(1200, 200, "test2"),
        LevelSplit(1400, 200, "test3"),
        LevelSplit(0, 1_000_000, "train-1m"),  # interpreting-rl-behavior's CoinRun agent
        LevelSplit(0, 0, "all"),  # the full distribution (Procgen "test" / validation)
    )
}

_RANGE = re.compile(r"^\s*(\d+)\s*[:+]\s*(\d+)\s*$")


def parse_split(spec: str | LevelSplit) -> LevelSplit:
    """A split by name (``train``, ``test1``, ``all``...) or as ``START:NUM`` (e.g. ``1000:200``)."""
    if isinstance(spec, LevelSplit):
        return spec
    text = str(spec).strip()
    if text in NAMED_SPLITS:
        return NAMED_SPLITS[text]
    m = _RANGE.match(text)
    if m:
        return LevelSplit(int(m.group(1)), int(m.group(2)))
    if re.match(r"^\s*-\d+|.*:\s*-\d+", text):
        raise ProclabError(f"level split {text!r} is invalid: start and num must be >= 0.")
    raise unknown_choice("level split", text, [*NAMED_SPLITS, "START:NUM"])


def check_disjoint(train: LevelSplit, test: LevelSplit) -> None:
    """Refuse a test split that shares levels with the training split.

    An unbounded split (``all``) is the Procgen paper's "full distribution" test: it formally
    contains the training levels but draws one of them with probability num/2^31 (< 1e-6 for
    1M levels), so it is allowed.
    """
    if train.bounded and test.bounded and train.overlaps(test):
        lo, hi = max(train.start, test.start), min(train.stop, test.stop)
        raise ProclabError(
            f"test split {test.label()} overlaps training split {train.label()} "
            f"on levels [{lo}, {hi}); choose disjoint splits (e.g. test1 = 1000:200)."
        )


HELD_OUT_LEVELS = 200  # as many as each of modern-srwm's test splits


def held_out_split(train: str | LevelSplit) -> LevelSplit | None:
    """Levels an agent trained on ``train`` has never seen: ``test1`` when it is disjoint from them,
    else the 200 levels right after them; ``None`` when it trained on every level."""
    train = parse_split(train)
    if not train.bounded:
        return None
    test1 = NAMED_SPLITS["test1"]
    if not train.overlaps(test1):
        return test1
    if train.stop + HELD_OUT_LEVELS > LEVEL_SEED_SPACE:
        return None
    return LevelSplit(train.stop, HELD_OUT_LEVELS)


def distinct_levels(split: LevelSplit, n: int, seed: int) -> np.ndarray:
    """``n`` distinct level seeds of ``split``, drawn with ``seed`` (sorted): the levels of a paired comparison,
    or of ``n`` episodes that should each play another level (procgen's own draw is with replacement)."""
    rng = np.random.default_rng([seed, 7])
    if split.bounded:
        if n > split.num:
            raise ProclabError(f"{n} distinct levels asked of split {split.label()}, which has {split.num}")
        return np.sort(split.start + rng.choice(split.num, n, replace=False))
    levels: set[int] = set()
    while len(levels) < n:
        levels.update(int(x) for x in rng.integers(0, LEVEL_SEED_SPACE, n - len(levels)))
    return np.array(sorted(levels), np.int64)


HELD_OUT = "held-out"
"""The split name that means: levels the agent never trained on (:func:`agent_split`)."""


def check_split_name(name: str) -> None:
    """Refuse, in one line, a split that is neither ``"held-out"`` nor a split :func:`parse_split` reads."""
    if name != HELD_OUT:
        parse_split(name)


def agent_split(name: str, trained: str | LevelSplit | None) -> LevelSplit:
    """The levels ``name`` means for an agent trained on ``trained``: ``"held-out"`` is
    :func:`held_out_split` of them (a one-line error when the agent trained on every level, or when its training
    levels are unknown), any other name is :func:`parse_split`'s. A split that overlaps the training levels
    (other than the training split itself) plays, with a :class:`~proclab.errors.ProclabWarning`: the agent saw
    those levels, which a held-out test must not have (``test1`` lies inside an agent trained on ``train-1m``)."""
    if name == HELD_OUT:
        if trained is None:
            raise ProclabError(
                f"levels={HELD_OUT!r} needs the agent's training levels (agent.env_config, set by proclab.load); "
                "name a split instead, e.g. 'test1'"
            )
        split = held_out_split(trained)
        if split is None:
            raise ProclabError(
                f"the agent trained on {parse_split(trained).label()}: no level is held out from it"
            )
        return split
    split = parse_split(name)
    if trained is not None:
        train = parse_split(trained)
        if train.bounded and split != train and split.overlaps(train):
            lo, hi = max(split.start, train.start), min(split.stop, train.stop)
            held_out = held_out_split(train)  # None: it trained on every level from its first on
            instead = f"; {HELD_OUT!r} plays {held_out.label()}" if held_out is not None else ""
            warnings.warn(
                f"levels {split.label()} overlap the agent's training levels {train.label()} on [{lo}, {hi}): "
                f"it has seen them{instead}",
                ProclabWarning,
                stacklevel=3,
            )
    return split
