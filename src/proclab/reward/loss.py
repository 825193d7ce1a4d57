"""The T-REX objective: Bradley-Terry cross-entropy on summed per-frame rewards, plus L1.

For a pair (worse clip ``w``, better clip ``b``) with per-frame rewards ``r``, the clip returns
are ``R = sum_t r(s_t)`` and the probability that ``b`` is preferred is
``exp(R_b) / (exp(R_w) + exp(R_b))``. Its negative log is ``softplus(R_w - R_b)``, which is
what the seed's ``CrossEntropyLoss`` over the logits ``[R_w, R_b]`` with target 1 computes.
The L1 term ``lam * sum |r|`` over both clips' frames keeps rewards small.

Batched training scores many pairs per step. Clips of a batch overlap (pairs share demos), so
each distinct frame goes through the network once (:func:`distinct_frames`) and its reward is
gathered into every clip that uses it (:func:`clip_rewards`): the same loss and gradient as
scoring each clip separately, for less compute.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from proclab.reward.pairs import clip_frames


def distinct_frames(first: Tensor, length: Tensor, stride: int) -> tuple[Tensor, Tensor, Tensor]:
    """The frame rows used by the clips of pairs ``first`` ``(B, 2)`` / ``length`` ``(B,)``, each once.

    Returns ``unique`` ``(U,)``, ``inverse`` ``(B, 2, K)`` (position of each clip frame in
    ``unique``) and ``mask`` ``(B, 1, K)`` (false on the padding of shorter clips).
    """
    index, mask = clip_frames(first, length, stride)
    unique, inverse = torch.unique(index, return_inverse=True)
    return unique, inverse, mask


def clip_rewards(unique_rewards: Tensor, inverse: Tensor, mask: Tensor) -> Tensor:
    """Per-frame rewards of every clip ``(B, 2, K)``, zero on padding."""
    return unique_rewards[inverse] * mask


def trex_loss(rewards: Tensor, lam_l1: float) -> tuple[Tensor, Tensor]:
    """Per-pair loss ``(B,)`` and clip returns ``(B, 2)`` from per-frame rewards ``(B, 2, K)``."""
    returns = rewards.sum(-1)
    loss = F.softplus(returns[:, 0] - returns[:, 1]) + lam_l1 * rewards.abs().sum((1, 2))
    return loss, returns
