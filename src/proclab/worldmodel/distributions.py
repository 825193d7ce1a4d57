"""Discrete latents with straight-through gradients, the balanced KL, and the bottleneck's uniformity loss.

Everything the simulator samples is one-hot: the RSSM's categoricals, the predicted previous
action and the agent's action. A one-hot draw has no gradient, so each is made
straight-through: the forward value is the one-hot, the backward pass sees a soft surrogate
(``hard + (soft - soft.detach())``). The surrogate is the probabilities for the RSSM latents and
the previous action, and the agent's log-probabilities for its action (the seed's
``predict_STE``). All of it runs in (at least) float32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from proclab.models.cores.base import full_precision


def straight_through(hard: Tensor, soft: Tensor) -> Tensor:
    """Exactly ``hard`` in the forward pass, the gradient of ``soft`` (alone) in the backward pass.

    ``hard`` is detached: a ``hard`` that carries a gradient of its own (a clamp of ``soft``) would add it to
    ``soft``'s, doubling the gradient wherever the clamp passes it, and a 16-step chain of frames by 2^16."""
    return hard.detach() + (soft - soft.detach())


def clamp_st(x: Tensor, low: float = 0.0, high: float = 1.0) -> Tensor:
    """``x`` clamped to ``[low, high]`` in the forward pass, the identity in the backward pass: a frame kept in
    [0, 1], or a camera shift past its limit, still gets the gradient that pulls it back."""
    return straight_through(x.clamp(low, high), x)


def one_hot_draw(logits: Tensor, modal: bool) -> Tensor:
    """One-hot over the last axis: the argmax (``modal``) or a draw from ``softmax(logits)``; no gradient."""
    logits = full_precision(logits.detach())
    if modal:
        index = logits.argmax(-1)
    else:
        flat = logits.reshape(-1, logits.shape[-1])
        index = torch.multinomial(flat.softmax(-1), 1).view(logits.shape[:-1])
    return F.one_hot(index, logits.shape[-1]).to(logits.dtype)


def sample_st(logits: Tensor, modal: bool = False) -> Tensor:
    """A straight-through one-hot sample (or mode) of ``softmax(logits)``: gradient of the probabilities."""
    return straight_through(one_hot_draw(logits, modal), full_precision(logits).softmax(-1))


def action_st(logits: Tensor, modal: bool = True) -> Tensor:
    """The agent's action as a straight-through one-hot: gradient of its log-probabilities."""
    return straight_through(one_hot_draw(logits, modal), full_precision(logits).log_softmax(-1))


def categorical_kl(p_logits: Tensor, q_logits: Tensor) -> Tensor:
    """KL(p || q) of categoricals over the last axis, summed over the second-to-last (the variables)."""
    p_log, q_log = full_precision(p_logits).log_softmax(-1), full_precision(q_logits).log_softmax(-1)
    return (p_log.exp() * (p_log - q_log)).sum((-1, -2))


def balanced_kl(post_logits: Tensor, prior_logits: Tensor, balance: float) -> Tensor:
    """DreamerV2's KL balancing: the value is KL(post || prior); ``balance`` of its gradient trains
    the prior towards the posterior, ``1 - balance`` the posterior towards the prior."""
    to_prior = categorical_kl(post_logits.detach(), prior_logits)
    to_post = categorical_kl(post_logits, prior_logits.detach())
    return balance * to_prior + (1 - balance) * to_post


def uniformity_loss(vectors: Tensor, diagonal: bool = True) -> Tensor:
    """``log(sum_{i != j} exp(-||v_i - v_j||^2) + B e)`` over the rows of ``vectors`` ``(B, D)``.

    Spreads the bottleneck vectors over the sphere (Wang and Isola's uniformity). The ``B e`` term
    is the seed's: its sum has ``exp(1)`` constants on the diagonal, which damp the gradient by
    ``S / (S + B e)``. ``diagonal=False`` leaves them out: ``log sum_{i != j}`` alone (0 for B < 2).
    """
    B = vectors.shape[0]
    v = full_precision(vectors)
    sq = (v.unsqueeze(0) - v.unsqueeze(1)).pow(2).sum(-1)
    off = -sq[~torch.eye(B, dtype=torch.bool, device=v.device)]
    if diagonal:
        return torch.logsumexp(torch.cat([off, off.new_ones(B)]), 0)
    if B < 2:
        return vectors.sum() * 0
    return torch.logsumexp(off, 0)
