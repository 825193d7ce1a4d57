"""What a direction looks at: the mean SmoothGrad saliency of its coordinate on the real frames where it
is most active.

For a moment ``(episode, t)`` the agent is replayed for the one step ``t`` from the state it entered
that step with (:mod:`proclab.interpret.atlas.episodes`: the stored one, or the one a rollout's agent
left the step before with), and the
coordinate of the state it leaves with is differentiated w.r.t. the frame ``obs_t`` (captum's
SmoothGrad, :func:`~proclab.interpret.saliency.real_frames.attribute`). Each moment's map is processed as
every saliency map of proclab (channel mean, divided by its mean ``|g|`` so every moment counts
alike, blurred: :func:`~proclab.interpret.saliency.pictures.process`), the maps of a direction's moments
are averaged and drawn over the mean of their frames (blue: raising the coordinate, red: lowering).
Rows of all directions go through the agent together, in batches.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from proclab.interpret.bases.coordinates import Coordinates
from proclab.interpret.saliency.pictures import overlay, process
from proclab.interpret.saliency.real_frames import attribute
from proclab.io.video import upscale
from proclab.models import capture
from proclab.models.hooks import device_of
from proclab.store.state_codec import StateCodec

BATCH = 32
"""Moments per SmoothGrad call (each is ``noise`` forward and backward passes of one step)."""


class CoordinateOfFrame(torch.nn.Module):
    """``frames (B, 3, H, W) -> (B,)``: coordinate ``dims[b]`` of the state the agent leaves step ``t``
    with, from the state it entered with; captum's noised copies of a row are consecutive."""

    def __init__(self, agent, coords: Coordinates, hook: str, state: dict, prev: Tensor | None, dims: Tensor):
        super().__init__()
        self.agent, self.coords, self.hook = agent, coords, hook
        self.state, self.prev, self.dims = state, prev, dims

    def forward(self, frames: Tensor) -> Tensor:
        reps = len(frames) // len(self.dims)
        state = {k: v.repeat_interleave(reps, 0) for k, v in self.state.items()}
        prev = None if self.prev is None else self.prev.repeat_interleave(reps, 0)[None]
        firsts = torch.zeros(1, len(frames), dtype=torch.bool, device=frames.device)
        with capture(self.agent, [self.hook]) as acts:
            self.agent.unroll(frames[None], state, firsts, prev)
        h = acts.calls(self.hook)[0].reshape(len(frames), -1)
        codes = self.coords.encode(h)
        return codes.gather(1, self.dims.repeat_interleave(reps)[:, None])[:, 0]


def moment_gradients(
    agent,
    coords: Coordinates,
    hook: str,
    recorded,
    moments: list[tuple[int, int, int]],
    noise: int,
    sigma: float,
) -> tuple[np.ndarray, np.ndarray]:
    """For ``moments`` (direction, episode, step): each frame ``(R, 3, H, W)`` uint8 and the SmoothGrad
    of the direction's coordinate w.r.t. it ``(R, 3, H, W)``."""
    codec = StateCodec(agent.state_shapes())
    device = device_of(agent)
    frames, grads = [], []
    for lo in range(0, len(moments), BATCH):
        part = moments[lo : lo + BATCH]
        obs, state, prev = recorded.step_inputs([(e, t) for _, e, t in part], codec, device)
        prev = prev if agent.config.prev_reward else None
        dims = torch.tensor([m for m, _, _ in part], device=device)
        model = CoordinateOfFrame(agent, coords, hook, state, prev, dims)
        method = "smoothgrad" if noise > 0 else "gradient"
        grads.append(attribute(model, obs.clone(), method, noise, sigma).detach().cpu().numpy())
        frames.append((obs * 255).round().byte().cpu().numpy())
    if not frames:
        return np.zeros((0, 3, 1, 1), np.uint8), np.zeros((0, 3, 1, 1), np.float32)
    return np.concatenate(frames), np.concatenate(grads)


def mean_map(frames: np.ndarray, grads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One direction's moments -> the mean processed map ``(H, W)`` and its picture over the mean frame."""
    maps = np.stack([process(g[None])[0] for g in grads])
    mean = maps.mean(0)
    frame = frames.astype(np.float64).mean(0).round().astype(np.uint8)
    picture = overlay(frame[None], mean[None])[0]
    zoom = max(1, 64 // picture.shape[0])
    return mean, upscale(picture[None], zoom)[0]


def saliency_images(
    agent, coords: Coordinates, hook: str, recorded, moments: dict[int, list[tuple[int, int]]], **kw
) -> dict[int, dict]:
    """Per direction with moments: the name of its picture (``<label><m>.png``), the picture (its mean map
    over the mean frame, RGB), the moments used and the raw mean channel-mean gradient ``(H, W)``."""
    rows = [(m, e, t) for m, pairs in moments.items() for e, t in pairs]
    frames, grads = moment_gradients(agent, coords, hook, recorded, rows, **kw)
    owner = np.array([m for m, _, _ in rows])
    result = {}
    for m in moments:
        sel = owner == m
        if not sel.any():
            continue
        _, picture = mean_map(frames[sel], grads[sel])
        name = f"{coords.label.lower()}{m:03d}.png"
        result[m] = {
            "image": name,
            "picture": picture,
            "moments": int(sel.sum()),
            "gradient": grads[sel].mean((0, 1)),
        }
    return result
