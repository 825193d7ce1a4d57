"""Fixed-length windows of steps from an episode store, as a torch ``Dataset``.

A window is ``length`` consecutive rows of *one* episode; windows never cross into the next
episode. Where a window may start:

* ``stride``: at offsets ``0, stride, 2*stride, ...`` of every episode (default ``length``:
  non-overlapping windows), or with ``episode_starts=True`` only at offset 0;
* ``min_steps``: a window must hold at least this many real steps (default ``length``, so
  windows lie entirely inside their episode and are never padded). With ``min_steps < length``
  windows may run past their episode's last step and are padded.

**Padding rules.** Rows past the episode's end are zeros of the field's dtype (black frames,
zero states, logits, values and rewards, action 0, ``terminated``/``truncated`` False) and
have ``mask`` False. Every item also has ``first`` (row is its episode's first step: row 0
of windows at offset 0), ``episode`` (global episode index) and ``offset`` (the row of the
episode the window starts at), plus the per-episode values named in ``info``.

The world model's windows (interpreting-rl-behavior: 3 initial frames + 32 simulated steps,
padded past the episode end) are ``WindowDataset(store, 34, stride=1, min_steps=3)``; unlike
the seed, a window whose initial frames would cross an episode boundary is not moved to the
next episode but simply does not exist.

Each DataLoader worker opens the store itself on first use (the dataset pickles as its path
and index), so any number of workers read in parallel.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from proclab.errors import ProclabError
from proclab.store.store import EpisodeStore


class WindowDataset(Dataset):
    """Windows of ``length`` steps over the episodes of a store (see the module docstring)."""

    def __init__(
        self,
        store: EpisodeStore | str | Path,
        length: int,
        *,
        stride: int | None = None,
        fields: Sequence[str] | None = None,
        info: Sequence[str] = (),
        episode_starts: bool = False,
        min_steps: int | None = None,
        episodes: Sequence[int] | np.ndarray | None = None,
    ):
        self._store = store if isinstance(store, EpisodeStore) else EpisodeStore(store)
        self._pid = os.getpid()
        self.path = self._store.path
        self.length = int(length)
        self.stride = self.length if stride is None else int(stride)
        self.min_steps = self.length if min_steps is None else int(min_steps)
        if self.length < 1 or self.stride < 1:
            raise ProclabError(f"window length and stride must be >= 1, got {self.length} and {self.stride}")
        if not 1 <= self.min_steps <= self.length:
            raise ProclabError(
                f"min_steps must be within 1..{self.length} (the window length), got {self.min_steps}"
            )
        valid = self._store.fields
        self.fields = list(valid if fields is None else fields)
        unknown = [f for f in self.fields if f not in valid]
        scalar_info = [k for k, v in self._store.episode_fields.items() if not v["shape"]] + [
            "start",
            "length",
        ]
        unknown += [k for k in info if k not in scalar_info]
        if unknown:
            raise ProclabError(
                f"unknown field(s) {', '.join(unknown)} for {str(self.path)!r}; per-step: {', '.join(valid)}; "
                f"per-episode: {', '.join(scalar_info)}"
            )
        self.info = list(info)
        self.episode_ids, self.offsets = self._index(episodes, episode_starts)

    def _index(self, episodes, episode_starts: bool) -> tuple[np.ndarray, np.ndarray]:
        lengths = self._store.episodes["length"]
        ids = np.arange(len(lengths)) if episodes is None else np.asarray(episodes, np.int64)
        T = lengths[ids] if len(ids) else np.zeros(0, np.int64)
        counts = np.where(self.min_steps <= T, (T - self.min_steps) // self.stride + 1, 0)
        if episode_starts:
            counts = np.minimum(counts, 1)
        if counts.sum() == 0:
            longest = int(T.max()) if len(T) else 0
            raise ProclabError(
                f"no window fits in {str(self.path)!r}: windows need {self.min_steps} real steps and the longest "
                f"of its {len(T)} episodes has {longest}; use a shorter length, or pad with a smaller min_steps"
            )
        first = np.repeat(np.cumsum(counts) - counts, counts)
        offsets = (np.arange(int(counts.sum())) - first) * self.stride
        return np.repeat(ids, counts), offsets

    @property
    def store(self) -> EpisodeStore:
        """This process's handle on the store (DataLoader workers open their own)."""
        if self._store is None or self._pid != os.getpid():
            self._store, self._pid = EpisodeStore(self.path), os.getpid()
        return self._store

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_store": None}

    def __len__(self) -> int:
        return len(self.episode_ids)

    def __getitem__(self, k: int) -> dict:
        store = self.store
        e, off = int(self.episode_ids[k]), int(self.offsets[k])
        n = min(self.length, int(store.episodes["length"][e]) - off)
        rows = store.read(e, self.fields, off, off + n)
        item = {}
        for name, a in rows.items():
            if n < self.length:
                padded = np.zeros((self.length, *a.shape[1:]), a.dtype)
                padded[:n] = a
                a = padded
            item[name] = torch.from_numpy(np.ascontiguousarray(a))
        mask = torch.zeros(self.length, dtype=torch.bool)
        mask[:n] = True
        first = torch.zeros(self.length, dtype=torch.bool)
        first[0] = off == 0
        item |= {"mask": mask, "first": first, "episode": torch.tensor(e), "offset": torch.tensor(off)}
        for name in self.info:
            v = store.episodes[name][e]
            item[name] = v if isinstance(v, str) else torch.tensor(v)
        return item
