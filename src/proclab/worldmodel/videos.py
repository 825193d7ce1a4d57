"""Prediction videos: true | teacher-forced | closed-loop frames side by side, with overlays.

One row per window, one column per way of predicting its frames:

* **true**: the recorded frames, with the recorded action and the recorded reward/done of
  the previous action;
* **teacher-forced**: the posterior reconstruction (recorded actions drive the environment),
  with the action the agent in the loop takes on it and the predicted reward/done;
* **closed loop**: imagination from the encoded initial frames alone (prior, predicted initial
  agent state and previous action, the agent's own actions), with the same overlays.

Frames past an episode's end are black in the true column. Reward and done on frame ``k`` are
those of the action before it (the model predicts them on the next frame).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from proclab.io.video import annotate, upscale, write_video
from proclab.worldmodel.batch import WindowBatch
from proclab.worldmodel.model import Trajectory, WorldModel
from proclab.worldmodel.simulate import dreamed, teacher_forced

SCALE = 3


def to_uint8(frames: torch.Tensor) -> np.ndarray:
    """Floats in [0, 1] (any leading dims, channels-first) -> uint8 numpy."""
    return frames.detach().float().clamp(0, 1).mul(255).round().to(torch.uint8).cpu().numpy()


def _column(frames: np.ndarray, actions: np.ndarray, reward: np.ndarray, done: np.ndarray, label: str):
    """One panel per step: (S, 3, 64, 64) -> (S, H, W, 3) annotated."""
    big = upscale(frames.transpose(0, 2, 3, 1), SCALE)
    return [
        annotate(f, int(a), [label, f"r {r:+.2f} d {d:.2f}"], arrow_size=12)
        for f, a, r, d in zip(big, actions, reward, done, strict=True)
    ]


def _panels(traj: Trajectory) -> tuple[np.ndarray, ...]:
    return (
        to_uint8(traj.frame),
        traj.action.argmax(-1).cpu().numpy(),
        traj.reward.float().cpu().numpy(),
        torch.sigmoid(traj.done_logit.float()).cpu().numpy(),
    )


@torch.no_grad()
def prediction_video(path: Path, wm: WorldModel, agent, batch: WindowBatch, autocast, fps: float = 8) -> Path:
    """Write the video for the windows of ``batch`` (already on the model's device)."""
    with autocast:
        _, forced = teacher_forced(wm, agent, batch)
        dream = dreamed(wm, agent, wm.encode(batch.init_frames), batch.frames.shape[0])
    true = (
        batch.frames.cpu().numpy(),
        batch.actions.cpu().numpy(),
        batch.reward.cpu().numpy(),
        batch.done.cpu().numpy(),
    )
    columns = [(true, "true"), (_panels(forced), "teacher-forced"), (_panels(dream), "closed loop")]
    rows = []
    for b in range(batch.batch_size):
        panels = [_column(*(x[:, b] for x in data), label) for data, label in columns]
        rows.append([np.concatenate(step, axis=1) for step in zip(*panels, strict=True)])
    frames = np.stack([np.concatenate(step, axis=0) for step in zip(*rows, strict=True)])
    return write_video(path, frames, fps=fps)
