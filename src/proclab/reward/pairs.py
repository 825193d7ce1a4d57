"""Which demos to learn from, and the clip pairs T-REX learns on.

**Demo selection** (``stratified_pick``). The seed spreads its ``N`` demos over the range of
returns: split ``[lo, hi]`` (``lo`` the lowest train return, ``hi = lo + max_return * (max - lo)``)
into 4 equal-width bins and cycle over them, taking one unused random demo from each, until
``N`` are picked; the first 80% train, the last 20% validate. The seed's loop could hang (too
few eligible demos, or bins that run dry) and could skip the top bin (bins built by float
accumulation). Here each demo's bin is an integer computed from its return (the top edge
belongs to the top bin), exhausted bins are skipped, and asking for more demos than there are
is an error before anything runs.

**Clip pairs** (``make_pairs``). Draw two demos with different returns; the one with the
higher return is *better*. Both clips get the same length ``L ~ U{min_len, ..., min(shorter
demo, max_len) - 1}``. With the progress heuristic (T-REX's, on by default) the worse clip
starts at ``s_w ~ U{0, ..., min_length - L}`` and the better one at ``s_b ~ U{s_w, ...,
len_better - L}``: the better demo's clip never starts earlier, so "later in a good episode"
is preferred to "earlier in a bad one", never the reverse. A clip uses every ``stride``-th
frame of its ``L`` (stride 1 as in the seed; T-REX Atari used 2).

A :class:`ClipPairs` row is ``(worse, better)``: column 1 is always the preferred clip, the
label the Bradley-Terry loss is trained on. Clips are index ranges, never copies of frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from proclab.errors import ProclabError

NUM_BINS = 4


def stratified_pick(
    returns: np.ndarray, num: int, rng: np.random.Generator, max_return: float = 1.0
) -> np.ndarray:
    """Indices of ``num`` demos spread over 4 return bins, in pick order (see the module docstring)."""
    returns = np.asarray(returns, np.float64)
    lo = returns.min() if len(returns) else 0.0
    hi = lo + max_return * (returns.max() - lo) if len(returns) else 0.0
    if len(returns) and hi <= lo:
        raise ProclabError(
            f"all {len(returns)} training demos have the same return ({lo:g}) within --max-return "
            f"{max_return:g}: there is no ranking to learn from"
        )
    eligible = np.flatnonzero(returns <= hi)
    if num > len(eligible):
        raise ProclabError(
            f"asked for {num} demos but only {len(eligible)} training demos are eligible "
            f"(longer than the shortest clip, return <= {hi:g}); record more with 'proclab trex demos'"
        )
    bins = np.minimum(((returns[eligible] - lo) / (hi - lo) * NUM_BINS).astype(np.int64), NUM_BINS - 1)
    queues = [list(rng.permutation(eligible[bins == b])) for b in range(NUM_BINS)]
    picked: list[int] = []
    while len(picked) < num:  # terminates: every pass takes >= 1 demo while any remain
        for queue in queues:
            if queue and len(picked) < num:
                picked.append(int(queue.pop()))
    return np.asarray(picked, np.int64)


def train_val_split(picked: np.ndarray, train_fraction: float = 0.8) -> tuple[np.ndarray, np.ndarray]:
    """The first 80% of the picked demos train, the rest validate (the seed's split)."""
    n_train = int(train_fraction * len(picked))
    return picked[:n_train], picked[n_train:]


@dataclass(frozen=True)
class ClipPairs:
    """``P`` clip pairs: ``demo``, ``start`` ``(P, 2)`` as (worse, better); ``length`` ``(P,)``; ``stride``."""

    demo: np.ndarray
    start: np.ndarray
    length: np.ndarray
    stride: int = 1

    def __len__(self) -> int:
        return len(self.length)

    def take(self, rows) -> ClipPairs:
        return ClipPairs(self.demo[rows], self.start[rows], self.length[rows], self.stride)


def make_pairs(
    lengths: np.ndarray,
    returns: np.ndarray,
    num: int,
    rng: np.random.Generator,
    *,
    min_len: int = 20,
    max_len: int = 100,
    stride: int = 1,
    progress: bool = True,
    what: str = "training",
) -> ClipPairs:
    """``num`` clip pairs from demos of the given lengths and returns (see the module docstring).

    Every demo must be longer than ``min_len``; at least two returns must differ.
    """
    lengths, returns = np.asarray(lengths, np.int64), np.asarray(returns, np.float64)
    if not 1 <= min_len < max_len or stride < 1:
        raise ProclabError(
            f"clip lengths need 1 <= min ({min_len}) < max ({max_len}) and stride >= 1 ({stride})"
        )
    if (lengths <= min_len).any():
        raise ValueError(f"every demo must be longer than min_len={min_len}; filter them first")
    values = np.unique(returns)
    if len(values) < 2:
        have = f"the single return {values[0]:g}" if len(values) else "no return"
        raise ProclabError(
            f"the {len(returns)} {what} demo(s) have {have}: no clip pair can be ranked; "
            "use more demos (or demos of more varied skill)"
        )
    i_parts, j_parts, have = [], [], 0
    while have < num:  # rejection sampling of demo pairs with different returns, vectorised
        i, j = rng.integers(0, len(returns), size=(2, 2 * (num - have) + 16))
        keep = returns[i] != returns[j]
        i_parts.append(i[keep])
        j_parts.append(j[keep])
        have += int(keep.sum())
    i, j = np.concatenate(i_parts)[:num], np.concatenate(j_parts)[:num]
    swap = returns[i] > returns[j]
    worse, better = np.where(swap, j, i), np.where(swap, i, j)
    len_w, len_b = lengths[worse], lengths[better]
    shortest = np.minimum(len_w, len_b)
    clip = rng.integers(min_len, np.minimum(shortest, max_len))
    if progress:
        s_w = rng.integers(0, shortest - clip + 1)
        s_b = rng.integers(s_w, len_b - clip + 1)
    else:
        s_w = rng.integers(0, len_w - clip + 1)
        s_b = rng.integers(0, len_b - clip + 1)
    return ClipPairs(np.stack([worse, better], 1), np.stack([s_w, s_b], 1), clip, stride)


def clip_frames(first: torch.Tensor, length: torch.Tensor, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Frame indices of clips starting at ``first`` ``(B, 2)`` (global frame rows) with ``length`` ``(B,)``.

    Returns ``index`` ``(B, 2, K)`` and ``mask`` ``(B, 1, K)``: clip ``(b, c)`` is frames
    ``index[b, c, :]`` where ``mask[b, 0, :]``; padded slots repeat the first frame (a valid row).
    """
    count = (length + stride - 1) // stride
    k = torch.arange(int(count.max()), device=first.device)
    mask = (k < count[:, None])[:, None, :]
    index = torch.where(mask, first[..., None] + k * stride, first[..., None])
    return index, mask
