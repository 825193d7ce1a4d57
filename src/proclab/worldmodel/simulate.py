"""The three ways the simulator is run, from data or from bottleneck vectors.

* :func:`teacher_forced` (training): recorded actions drive the environment, the RSSM samples
  its posterior (it sees the true frames), the agent starts from its recorded state.
* :func:`open_loop_pass` (training, ``LossWeights.open_loop``): the prior driven by the recorded
  actions; frames, shifts, rewards and dones, no agent.
* :func:`imagined` (evaluation, ``loss-over-time``): the RSSM samples its prior; the agent
  starts from its recorded state; the environment is driven by the recorded actions (the
  seed's setting) or by the agent's own (closed loop), starting from the recorded ``a_{-1}``.
* :func:`dreamed` (``wm sample``, videos, saliency): nothing but a bottleneck vector; the
  initial agent state and previous action are the converters' predictions, the loop is closed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import torch
from torch import Tensor

from proclab.store.state_codec import StateCodec
from proclab.worldmodel.batch import WindowBatch
from proclab.worldmodel.camera import measured_shift
from proclab.worldmodel.distributions import sample_st
from proclab.worldmodel.model import Start, Trajectory, WorldModel, as_float_frames

ACTION_SOURCES = ("true", "agent")


def frame_before(batch: WindowBatch) -> Tensor:
    """The true frame before simulated step 0 (row ``r0 - 1``), in [0, 1]: what a copy path copies first."""
    return as_float_frames(batch.init_frames[-2])


def shift_before(wm: WorldModel, batch: WindowBatch) -> Tensor | None:
    """The camera's move between the two true frames before step 0 (rows ``r0 - 2``, ``r0 - 1``), measured,
    for a ``camera_motion`` model to carry on from; None for other models or with fewer than 3 initial
    frames."""
    if not wm.config.camera_motion or batch.init_frames.shape[0] < 3:
        return None
    frames = as_float_frames(batch.init_frames)
    return measured_shift(frames[-3], frames[-2], wm.config.camera_shift)


def teacher_forced(
    wm: WorldModel, agent, batch: WindowBatch, modal: bool = False
) -> tuple[Start, Trajectory]:
    """The training forward pass; returns the *predicted* start (for the initialisation losses) too.
    ``modal`` takes the argmax of each categorical instead of sampling (evaluation).

    The reward and done of step ``k`` (caused by ``a_{k-1}``) are read from the *prior's* state at ``k``
    (``h_k`` and the prior's sample), which knows the history and the action but not frame ``k``. Read from
    the posterior, they would see frame ``k``, and the step whose reward ends an episode (the coin) has no
    frame: its label is zero padding, so the heads learned "black frame = coin, end" (and, with the prior
    taken at padded steps only, "prior state = end"). A dream's states are all the prior's, so this is
    also the input the heads meet in a dream."""
    start = wm.start(wm.encode(batch.init_frames), modal=modal)
    traj = wm.simulate(
        agent,
        replace(start, agent_state=batch.agent_h0, frame=frame_before(batch), shift=shift_before(wm, batch)),
        batch.frames.shape[0],
        actions=batch.prev_action_one_hot(wm.num_actions),
        frames=batch.frames,
        observe=True,
        modal=modal,
    )
    S, B = traj.env_h.shape[:2]
    prior = torch.cat([traj.env_h, sample_st(traj.prior_logits, modal).flatten(2)], -1)
    reward, done = wm.reward_done(prior.flatten(0, 1))
    traj.reward, traj.done_logit = reward.view(S, B), done.view(S, B)
    if wm.config.decoder_copy:
        traj.image_alone = wm.decode(torch.cat([traj.env_h[0], traj.env_z[0]], -1))
    return start, traj


class OpenLoopPass(NamedTuple):
    """What training's open-loop pass predicts, each ``(S, B, ...)`` as in :class:`~.model.Trajectory`."""

    image: Tensor
    shift: Tensor | None
    reward: Tensor
    done_logit: Tensor


def open_loop_pass(wm: WorldModel, start: Start, batch: WindowBatch) -> OpenLoopPass:
    """Training's open-loop pass (``LossWeights.open_loop``): the frames, camera shifts, rewards and dones the
    prior predicts when the recorded actions drive it from ``start`` (the converters' initial state, as a
    dream starts) and the true frame before step 0; the agent is not run. The rewards matter as much as the
    frames: a reward head trained on posterior states alone reads a coin it is shown, and a dream, whose
    states are all the prior's, never shows it one."""
    actions = batch.prev_action_one_hot(wm.num_actions)
    feat, _ = wm.prior_rollout(start, actions)
    image, shift = wm.decode_steps(feat, frame_before(batch), actions, shift_before(wm, batch))
    return OpenLoopPass(image, shift, *wm.reward_done(feat))


def imagined(
    wm: WorldModel,
    agent,
    batch: WindowBatch,
    actions: str | Tensor = "true",
    modal: bool = True,
    greedy: bool = True,
) -> Trajectory:
    """Prior-driven simulation from the encoded initial frames, compared step by step with the data;
    in closed loop (``actions="agent"``) the agent takes its modal action, or with ``greedy=False`` a draw
    of its policy. ``actions`` may also be the actions themselves, ``(S, B)`` indices ``a_{k-1}`` (other
    than the recorded ones: what controllability compares)."""
    if isinstance(actions, Tensor):
        one_hot = torch.nn.functional.one_hot(actions.long(), wm.num_actions).float()
    elif actions in ACTION_SOURCES:
        one_hot = batch.prev_action_one_hot(wm.num_actions)
    else:
        raise ValueError(f"actions must be one of {ACTION_SOURCES} or a tensor, got {actions!r}")
    start = wm.start(wm.encode(batch.init_frames), modal=modal)
    start = replace(
        start,
        agent_state=batch.agent_h0,
        prev_action=one_hot[0],
        frame=frame_before(batch),
        shift=shift_before(wm, batch),
    )
    return wm.simulate(
        agent,
        start,
        batch.frames.shape[0],
        actions=None if isinstance(actions, str) and actions == "agent" else one_hot,
        frames=batch.frames,
        modal=modal,
        greedy=greedy,
    )


def dreamed(
    wm: WorldModel,
    agent,
    bottleneck: Tensor,
    steps: int,
    *,
    modal: bool = True,
    greedy: bool = True,
    env_grads: bool = True,
    predicted_agent_state: bool = True,
    detach_start: bool = True,
    start_frame: Tensor | None = None,
) -> Trajectory:
    """Closed-loop simulation from bottleneck vectors alone.

    ``predicted_agent_state=False`` starts the agent from its own initial state instead of the
    converter's prediction (for an agent other than the one the model was trained with);
    ``detach_start=False`` lets gradients reach the bottleneck through the predicted initial
    agent state and action too (:meth:`WorldModel.start`). ``start_frame`` ``(B, 3, 64, 64)``: the real
    frame before step 0 when the bottleneck encodes real frames (a copy-path decoder copies it; without
    it step 0 is generated from the state alone).
    """
    start = wm.start(bottleneck, modal=modal, detach=detach_start)
    if start_frame is not None:
        start = replace(start, frame=as_float_frames(start_frame))
    if not predicted_agent_state:
        codec = StateCodec(agent.state_shapes())
        B = bottleneck.shape[0]
        initial = agent.initial_state(B, device=bottleneck.device)
        flat = codec.flatten(initial) if codec.width else bottleneck.new_zeros(B, 0)
        start = replace(start, agent_state=flat.float())
    return wm.simulate(agent, start, steps, modal=modal, greedy=greedy, env_grads=env_grads)


def random_bottlenecks(n: int, size: int, generator: torch.Generator | None = None) -> Tensor:
    """``n`` vectors uniformly distributed on the unit sphere (the seed's "random init")."""
    v = torch.randn(n, size, generator=generator)
    return v / v.norm(dim=-1, keepdim=True).clamp(min=1e-8)
