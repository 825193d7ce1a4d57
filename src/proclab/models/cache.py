"""The activation cache: every recorded hook point by name, as torch tensors, padded or packed.

A researcher indexes it by hook name (``cache["core.0.hook_h"]``), as in TransformerLens. Time and
batch always come first, so the torso's hooks (computed on frames flattened over time), the core's
per-step state and the heads' outputs line up step for step. A cache of complete episodes (a rollout's)
also carries ``mask`` (``(T, B)``: the row was still in its episode) and ``levels`` (``(B,)``: each row's
level), and has two views of each hook:

* **padded**, ``cache[name]``: ``(T, B, *sample)``, zeros past each episode's end; ``T`` is the longest
  episode, so it takes ``T * B * sample`` floats whatever the other episodes' lengths;
* **packed**, ``cache.packed(name)``: the played steps only, ``(N, *sample)`` with each row's episode and
  step (``N = mask.sum()``, episode-major: episode 0's steps, then episode 1's), the form probes and bases
  fit on; ``cache.episode(name, b)`` is one episode's ``(length, *sample)`` slice of it.

A cache taken with ``grad=True`` (:func:`~proclab.models.edited.run_with_cache`) keeps the activations'
autograd graph: :meth:`ActivationCache.gradients` gives the gradient of an output with respect to every
cached activation, as a cache of the same shapes (the cached tensors are reshaped or stacked from what the
network computed, so ``torch.autograd.grad`` with respect to them directly would find them unused).

A rollout keeps the packed rows (4 bytes per float per played step) and builds a hook's padded tensor
on first use, then keeps it too: on episodes of uneven lengths (CoinRun's run from 10 to 1,000 steps)
the padded view can be several times the packed one, and a conv hook of 32 x 32 x 32 floats is 128 kB a
step, so read long rollouts' conv hooks packed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator, Mapping
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from proclab.errors import ProclabError, unknown_choice


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


def time_major(calls: list[Tensor], layout: str, T: int, B: int) -> Tensor:
    """A hook point's recorded calls over ``T`` steps of ``B`` rows as one ``(T, B, *sample)`` tensor, by its
    layout (:mod:`proclab.models.hooks`): once per step (``step``), frames flattened over time (``flat``) or
    time-major already (``time``)."""
    if layout == "step":
        return torch.stack(calls)
    x = calls[0] if len(calls) == 1 else torch.cat(calls)
    return x.reshape(T, B, *x.shape[1:]) if layout == "flat" else x


class Packed(NamedTuple):
    """A hook's played steps: ``values`` ``(N, *sample)``, and each row's ``episode`` and ``step`` ``(N,)``."""

    values: Tensor
    episode: Tensor
    step: Tensor


class ActivationCache(Mapping[str, Tensor]):
    """Hook name -> ``(T, B, *sample)`` tensor (module docstring); ``mask`` ``(T, B)`` marks the steps that
    were played (None: all), ``levels`` ``(B,)`` each row's level seed (None when unknown).

    Made from padded tensors (``ActivationCache(values, mask, levels)``), or from packed rows with
    :meth:`from_packed`; either way both views are there."""

    def __init__(
        self,
        values: Mapping[str, Tensor],
        mask: Tensor | None = None,
        levels: Tensor | np.ndarray | None = None,
    ) -> None:
        self._padded = dict(values)
        self._packed: dict[str, Tensor] = {}
        self._graph: tuple[dict, int, int] | None = None
        self._names = list(self._padded)
        self.mask = None if mask is None else torch.as_tensor(mask).bool()
        self.levels = None if levels is None else torch.as_tensor(levels)

    @classmethod
    def from_packed(
        cls, rows: Mapping[str, Tensor], lengths: Tensor, levels: Tensor | np.ndarray | None = None
    ) -> ActivationCache:
        """A cache of ``B`` episodes of ``lengths`` ``(B,)`` steps from their packed rows, each ``(N, *sample)``
        with ``N = lengths.sum()``, episode-major."""
        lengths = torch.as_tensor(lengths, dtype=torch.long)
        T = int(lengths.max()) if len(lengths) else 0
        mask = torch.arange(T)[:, None] < lengths[None, :]
        for name, x in rows.items():
            if len(x) != int(lengths.sum()):
                raise ValueError(f"{name}: {len(x)} packed rows for episodes of {int(lengths.sum())} steps")
        cache = cls({}, mask, levels)
        cache._packed, cache._names = dict(rows), list(rows)
        return cache

    def keep_graph(self, calls: Mapping[str, tuple[list[Tensor], str]], T: int, B: int) -> None:
        """Keep each hook's raw calls (``name -> (calls, layout)``, still in the graph) for :meth:`gradients`."""
        self._graph = (dict(calls), T, B)

    def gradients(self, output: Tensor) -> ActivationCache:
        """``d output / d activation`` for every cached hook point, as a cache of the same ``(T, B, *sample)``
        shapes (zeros where the output does not depend on it); ``output`` is a scalar computed from this
        forward pass. Only for a cache taken with ``grad=True``; the graph is kept for further calls."""
        if self._graph is None:
            raise ProclabError("this cache keeps no graph: take it with run_with_cache(..., grad=True)")
        calls, T, B = self._graph
        flat = [(name, i) for name, (c, _) in calls.items() for i in range(len(c))]
        tensors = [calls[name][0][i] for name, i in flat]
        grads = torch.autograd.grad(output, tensors, retain_graph=True, allow_unused=True)
        per_name: dict[str, list[Tensor]] = {name: [] for name in calls}
        for (name, _), t, g in zip(flat, tensors, grads, strict=True):
            per_name[name].append(torch.zeros_like(t) if g is None else g)
        out = {name: time_major(per_name[name], layout, T, B) for name, (_, layout) in calls.items()}
        return ActivationCache(out, self.mask, self.levels)

    def __getitem__(self, name: str) -> Tensor:
        if name not in self._names:
            raise unknown_choice("cached hook point", name, self._names)
        if name not in self._padded:
            values, episode, step = self.packed(name)
            assert self.mask is not None  # packed rows come with their mask (from_packed)
            padded = values.new_zeros((*self.mask.shape, *values.shape[1:]))
            padded[step, episode] = values
            self._padded[name] = padded
        return self._padded[name]

    def packed(self, name: str) -> Packed:
        """The played steps of hook ``name`` (module docstring): ``(values, episode, step)``, no padding."""
        if name not in self._names:
            raise unknown_choice("cached hook point", name, self._names)
        step, episode = self._index()
        if name in self._packed:
            return Packed(self._packed[name], episode, step)
        return Packed(self._padded[name][step, episode], episode, step)

    def episode(self, name: str, b: int) -> Tensor:
        """Episode ``b``'s ``(length, *sample)`` values of hook ``name`` (a view of the packed rows)."""
        if self.mask is None:
            return self[name][:, b]
        lengths = self.mask.sum(0)
        if not 0 <= b < len(lengths):
            raise ProclabError(f"episode {b}: this cache holds episodes 0-{len(lengths) - 1}")
        if name in self._packed:
            start = int(lengths[:b].sum())
            return self._packed[name][start : start + int(lengths[b])]
        return self[name][: int(lengths[b]), b]

    def _index(self) -> tuple[Tensor, Tensor]:
        """``(step, episode)`` of every played row, episode-major."""
        if self.mask is None:
            T, B = next(iter(self._padded.values())).shape[:2]
            mask = torch.ones((T, B), dtype=torch.bool)
        else:
            mask = self.mask.cpu()
        episode, step = mask.T.nonzero(as_tuple=True)  # row-major over (B, T): episode 0's steps first
        return step, episode

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        def shape(name: str) -> tuple[int, ...]:
            if name in self._padded:
                return tuple(self._padded[name].shape)
            assert self.mask is not None  # packed rows come with their mask (from_packed)
            return (*self.mask.shape, *self._packed[name].shape[1:])

        return f"ActivationCache({', '.join(f'{k}: {shape(k)}' for k in self._names)})"

    def select(self, pattern: str) -> ActivationCache:
        """The entries whose names match a glob pattern (``"torso.block1.*"``), same mask and levels."""
        names = resolve_names(pattern, dict.fromkeys(self._names))
        out = ActivationCache(
            {n: self._padded[n] for n in names if n in self._padded}, self.mask, self.levels
        )
        out._packed = {n: self._packed[n] for n in names if n in self._packed}
        out._names = names
        return out
