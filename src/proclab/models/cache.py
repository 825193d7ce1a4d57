"""The activation cache: every recorded hook point as one ``(T, B, *sample)`` tensor, whatever its layout.

A researcher indexes it by hook name (``cache["core.0.hook_h"]``), as in TransformerLens. Time and
batch always come first, so the torso's hooks (computed on frames flattened over time), the core's
per-step state and the heads' outputs line up step for step. A cache from a rollout also carries
``mask`` (``(T, B)``: the row was still in its episode) and ``levels`` (``(B,)``: each row's level), and
:meth:`ActivationCache.rows` gives the valid steps as ``(N, *sample)`` with their episode and step,
the form probes and bases fit on.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator, Mapping

import numpy as np
import torch
from torch import Tensor

from proclab.errors import unknown_choice


def resolve_names(names: Iterable[str] | str | None, points: Mapping) -> list[str]:
    """Hook names or glob patterns (``torso.block1.*``) -> the matching hook names, in forward order;
    None is every hook point."""
    if names is None:
        return list(points)
    if isinstance(names, str):
        names = [names]
    chosen: list[str] = []
    for pattern in names:
        hits = [n for n in points if fnmatch.fnmatchcase(n, pattern)]
        if not hits:
            raise unknown_choice("hook point", pattern, points)
        chosen += [h for h in hits if h not in chosen]
    return [n for n in points if n in chosen]


class ActivationCache(Mapping[str, Tensor]):
    """Hook name -> ``(T, B, *sample)`` tensor; ``mask`` ``(T, B)`` marks the steps that were played
    (None: all), ``levels`` ``(B,)`` each row's level seed (None when unknown)."""

    def __init__(
        self,
        values: Mapping[str, Tensor],
        mask: Tensor | None = None,
        levels: np.ndarray | None = None,
    ):
        self._values = dict(values)
        self.mask = mask
        self.levels = levels

    def __getitem__(self, name: str) -> Tensor:
        if name not in self._values:
            raise unknown_choice("cached hook point", name, self._values)
        return self._values[name]

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}: {tuple(v.shape)}" for k, v in self._values.items())
        return f"ActivationCache({shapes})"

    def select(self, pattern: str) -> ActivationCache:
        """The entries whose names match a glob pattern (``"torso.block1.*"``), same mask and levels."""
        names = resolve_names(pattern, self._values)
        return ActivationCache({n: self._values[n] for n in names}, self.mask, self.levels)

    def rows(self, name: str) -> tuple[Tensor, np.ndarray, np.ndarray]:
        """The played steps of hook ``name``: ``(N, *sample)`` values, and each one's row (episode) and step."""
        x = self[name]
        T, B = x.shape[:2]
        mask = torch.ones((T, B), dtype=torch.bool) if self.mask is None else self.mask.cpu().bool()
        step, row = (a.numpy() for a in mask.nonzero(as_tuple=True))
        order = np.lexsort((step, row))  # episode-major: row 0's steps, then row 1's
        step, row = step[order], row[order]
        return x[torch.from_numpy(step), torch.from_numpy(row)], row, step
