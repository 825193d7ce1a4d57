"""The world model's loss table (interpreting-rl-behavior §4.2), per step and summed.

Per step ``k`` and sequence (tensors ``(S, B)``), each masked as :mod:`.batch` says:

==============  =====================================================  ============
term            value                                                  mask
==============  =====================================================  ============
image           ``0.5 * sum_{C,H,W} (x_hat - x)^2`` (a sum, not a mean)  frame
reward          ``0.5 * (r_hat - r)^2``                                 prev
done            Bernoulli negative log-likelihood                      prev
agent_state     ``0.5 * sum_D (h_hat - h)^2``                           state
kl              balanced KL(posterior || prior), summed over variables  frame
env_update      ``||h_k - h_{k-1}||_2`` of the RSSM's deterministic state  frame
shift           ``||s_hat - s||^2``, the camera shift against the one     frame
                measured between true frames (``LossWeights.shift``)
==============  =====================================================  ============

Total = mean over sequences of the weighted sum over steps, plus ``bottleneck *`` the
uniformity loss of the batch's bottleneck vectors (with the seed's diagonal constants unless
``bottleneck_diagonal`` is off), plus the initialisation losses (mean over
sequences): squared error of the predicted initial agent state and cross-entropy of the
predicted previous action. Every term is logged unweighted (``losses/<term>``), except that with
``changed_pixels > 0`` the image term counts each pixel that changed since the previous true frame
``1 + changed_pixels`` times (:func:`changed_pixels`): small moving objects then weigh in the sum.
With ``policy_kl > 0`` the KL from the recorded agent's policy to the agent's policy on the simulated
frame is a term too (``policy_kl``, masked as the frame): the frame is drawn for an agent, and what it
acts on is what must be right.
A copy-path model (``decoder_copy``) also learns step 0 without a frame to copy (``image_alone``,
weighted as ``image``): that is how a dream from a bottleneck alone starts. With ``open_loop > 0``
the image, shift, reward and done terms are also taken on an open-loop pass (the prior, driven by the
recorded actions from the encoded start, :func:`~.simulate.open_loop_pass`) and added, each weighted
``open_loop`` times its teacher-forced twin (``losses/open_loop_<term>``): the frames and rewards a
dream predicts come from prior states, which teacher forcing never decodes.

:func:`eval_terms` adds what only evaluation needs (value error, policy KL, and how often the
agent's greedy action on the simulated frame differs from its greedy action on the true one),
for ``proclab wm loss-over-time``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from proclab.worldmodel.batch import WindowBatch
from proclab.worldmodel.camera import measured_shift
from proclab.worldmodel.config import LossWeights
from proclab.worldmodel.distributions import balanced_kl, uniformity_loss
from proclab.worldmodel.model import Start, Trajectory
from proclab.worldmodel.simulate import OpenLoopPass

TERM_MASKS = {
    "image": "frame_mask",
    "reward": "prev_mask",
    "done": "prev_mask",
    "agent_state": "state_mask",
    "kl": "frame_mask",
    "env_update": "frame_mask",
    "shift": "frame_mask",
    "value": "frame_mask",
    "policy_kl": "frame_mask",
    "action_mismatch": "frame_mask",
}


def changed_pixels(batch: WindowBatch, threshold: float) -> Tensor:
    """``(S, B, 1, 64, 64)``: 1 where some channel of true frame ``k`` differs from true frame ``k - 1``
    (row ``r0 - 1`` before step 0) by more than ``threshold``."""
    true = torch.cat([batch.init_frames[-2:-1], batch.frames]).float().div(255)
    return ((true[1:] - true[:-1]).abs().amax(-3, keepdim=True) > threshold).float()


def shift_labels(batch: WindowBatch, max_shift: float) -> Tensor:
    """``(S, B, 2)``: the camera shift from true frame ``k - 1`` to true frame ``k`` (row ``r0 - 1`` before
    step 0), measured from the pixels within ``max_shift`` (:func:`~.camera.measured_shift`)."""
    true = torch.cat([batch.init_frames[-2:-1], batch.frames])
    S, B = batch.frames.shape[:2]
    shift = measured_shift(true[:-1].flatten(0, 1), true[1:].flatten(0, 1), max_shift)
    return shift.view(S, B, 2)


def image_terms(
    image: Tensor,
    shift: Tensor | None,
    batch: WindowBatch,
    w: LossWeights,
    shift_target: Tensor | None = None,
) -> dict[str, Tensor]:
    """Unmasked per-step ``image`` term ``(S, B)`` (each changed pixel weighted ``1 + w.changed_pixels``) and,
    given the measured ``shift_target`` and a predicted ``shift``, the ``shift`` term."""
    sq = (image.float() - batch.frames.float().div(255)).pow(2)
    if w.changed_pixels:
        sq = sq * (1 + w.changed_pixels * changed_pixels(batch, w.change_threshold))
    terms = {"image": 0.5 * sq.sum((-3, -2, -1))}
    if shift is not None and shift_target is not None:
        terms["shift"] = (shift.float() - shift_target).pow(2).sum(-1)
    return terms


def reward_done_terms(reward: Tensor, done_logit: Tensor, batch: WindowBatch) -> dict[str, Tensor]:
    """Unmasked per-step ``reward`` (half squared error) and ``done`` (Bernoulli NLL) terms ``(S, B)``."""
    return {
        "reward": 0.5 * (reward - batch.reward).pow(2),
        "done": F.binary_cross_entropy_with_logits(done_logit, batch.done, reduction="none"),
    }


def step_terms(
    traj: Trajectory, batch: WindowBatch, w: LossWeights | None = None, shift_target: Tensor | None = None
) -> dict[str, Tensor]:
    """Unmasked per-step terms ``(S, B)`` (weights ``w`` only inside the image term, for its changed pixels;
    ``w.kl_balance`` splits the KL's gradient); ``kl`` only if the posterior was computed, ``shift`` only
    given its measured target."""
    w = w or LossWeights()
    h_prev = torch.cat([traj.start.env_h.unsqueeze(0), traj.env_h[:-1]])
    terms = {
        **image_terms(traj.image, traj.shift, batch, w, shift_target),
        **reward_done_terms(traj.reward, traj.done_logit, batch),
        "agent_state": 0.5 * (traj.agent_state.float() - batch.agent_states).pow(2).sum(-1),
        "env_update": torch.linalg.vector_norm(traj.env_h - h_prev, dim=-1),
    }
    if traj.post_logits is not None:
        terms["kl"] = balanced_kl(traj.post_logits, traj.prior_logits, w.kl_balance)
    return terms


def greedy_actions(batch: WindowBatch) -> Tensor:
    """The recorded agent's most likely action at each frame (its clean logits' argmax; the recorded,
    sampled action if the store has no logits): what the agent in the loop, acting greedily, should do."""
    return batch.actions if batch.logits is None else batch.logits.argmax(-1)


def eval_terms(traj: Trajectory, batch: WindowBatch) -> dict[str, Tensor]:
    """:func:`step_terms` plus the agent's value error, policy KL and action mismatch against the data."""
    terms = step_terms(traj, batch)
    terms["action_mismatch"] = (traj.action.argmax(-1) != greedy_actions(batch)).float()
    if batch.value is not None:
        terms["value"] = 0.5 * (traj.value.float() - batch.value).pow(2)
    if batch.logits is not None:
        terms["policy_kl"] = policy_kl(traj, batch)
    return terms


def policy_kl(traj: Trajectory, batch: WindowBatch) -> Tensor:
    """``(S, B)``: KL(recorded policy || the agent's policy on the simulated frame), per step."""
    data, sim = batch.logits.log_softmax(-1), traj.logits.float().log_softmax(-1)
    return (data.exp() * (data - sim)).sum(-1)


def _weight(w: LossWeights, term: str) -> float:
    """A term's weight; an open-loop term weighs ``w.open_loop`` times its teacher-forced twin."""
    if term.startswith("open_loop_"):
        return w.open_loop * getattr(w, term.removeprefix("open_loop_"))
    return getattr(w, term)


def masked(terms: dict[str, Tensor], batch: WindowBatch) -> dict[str, Tensor]:
    """Each term times its mask (see the table in the module docstring)."""
    return {k: v * getattr(batch, TERM_MASKS[k]) for k, v in terms.items()}


def world_model_loss(
    start: Start,
    traj: Trajectory,
    batch: WindowBatch,
    w: LossWeights,
    shift_target: Tensor | None = None,
    open_loop: OpenLoopPass | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Total loss (a scalar with a graph) and every term, unweighted and detached, for logging.

    ``start`` holds the converters' predictions (the simulation itself may have started from the
    recorded agent state and action, as in teacher forcing). ``shift_target``: the measured camera
    shifts (:func:`shift_labels`) for the ``shift`` term; ``open_loop``: the frames and shifts of an
    open-loop pass (:func:`~.simulate.open_loop_pass`), whose terms count ``w.open_loop`` times their twins.
    """
    terms = step_terms(traj, batch, w, shift_target)
    if w.policy_kl:
        terms["policy_kl"] = policy_kl(traj, batch)
    per_seq = {k: v.sum(0) for k, v in masked(terms, batch).items()}
    if open_loop is not None:
        terms = image_terms(open_loop.image, open_loop.shift, batch, w, shift_target)
        terms = masked(terms | reward_done_terms(open_loop.reward, open_loop.done_logit, batch), batch)
        per_seq |= {f"open_loop_{k}": v.sum(0) for k, v in terms.items()}
    model = sum(_weight(w, k) * v for k, v in per_seq.items()).mean()
    parts = {
        "bottleneck": uniformity_loss(start.bottleneck, w.bottleneck_diagonal),
        "init_state": (start.agent_state - batch.agent_h0).pow(2).sum(-1).mean(),
        "init_action": F.cross_entropy(start.action_logits, batch.prev_actions[0]),
    }
    if traj.image_alone is not None:  # weighted as the image term
        target = batch.frames[0].float().div(255)
        alone = 0.5 * (traj.image_alone.float() - target).pow(2).sum((-3, -2, -1)).mean()
        parts["image_alone"] = alone
    weights = {k: getattr(w, "image" if k == "image_alone" else k) for k in parts}
    total = model + sum(weights[k] * v for k, v in parts.items())
    metrics = {f"losses/{k}": v.mean().detach() for k, v in per_seq.items()}
    metrics |= {f"losses/{k}": v.detach() for k, v in parts.items()}
    metrics |= {"losses/model": model.detach(), "losses/total": total.detach()}
    agree = (traj.action.argmax(-1) == greedy_actions(batch)).float() * batch.frame_mask
    metrics["charts/action_agreement"] = agree.sum() / batch.frame_mask.sum().clamp(min=1)
    return total, metrics
