"""Frame gradients as pictures: the seed's processing, PNG strips and side-by-side videos.

Processing (interpreting-rl-behavior's, kept so maps compare with its figures): the channel
mean of the gradient, divided by the sample's mean ``|g|`` (so maps of different targets share
a scale), a Gaussian blur (kernel 5, sigma 5), then positive gradient in blue and negative in
red, 0.2 * 255 per unit, over the frame dimmed to 0.2. The target step gets a green marker.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from proclab.io.video import annotate, to_hwc, upscale, write_video

BLUR_SIZE, BLUR_SIGMA = 5, 5.0
GAIN = 0.2 * 255
DIM = 0.2
MARK_ROWS, MARK_COLS = slice(5, 11), slice(18, 30)


def gaussian_blur(maps: np.ndarray, size: int = BLUR_SIZE, sigma: float = BLUR_SIGMA) -> np.ndarray:
    """Separable Gaussian blur of ``(..., H, W)`` maps; edges reflect."""
    x = np.arange(size) - (size - 1) / 2
    kernel = np.exp(-(x**2) / (2 * sigma**2))
    kernel /= kernel.sum()
    pad = size // 2
    out = maps.astype(np.float64)
    for axis in (-2, -1):
        widths = [(0, 0)] * out.ndim
        widths[axis] = (pad, pad)
        padded = np.pad(out, widths, mode="reflect")
        n = out.shape[axis]
        out = sum(kernel[i] * np.take(padded, np.arange(i, i + n), axis=axis) for i in range(size))
    return out


def process(grad: np.ndarray) -> np.ndarray:
    """Frame gradients ``(S, 3, H, W)`` of one sample -> signed maps ``(S, H, W)`` in units of mean |g|."""
    m = grad.mean(1)
    scale = np.abs(m).mean()
    return gaussian_blur(m / scale if scale > 0 else m)


def overlay(frames: np.ndarray, maps: np.ndarray, target_step: int | None = None) -> np.ndarray:
    """uint8 frames ``(S, 3, H, W)`` and signed maps ``(S, H, W)`` -> RGB ``(S, H, W, 3)`` uint8."""
    out = to_hwc(frames).astype(np.float64) * DIM
    out[..., 2] += GAIN * np.clip(maps, 0, None)
    out[..., 0] += GAIN * np.clip(-maps, 0, None)
    out = np.clip(out, 0, 255).round().astype(np.uint8)
    if target_step is not None:
        out[target_step, MARK_ROWS, MARK_COLS] = (0, 255, 0)
    return out


def strip(frames: np.ndarray, grad: np.ndarray, target_step: int, scale: int = 2) -> np.ndarray:
    """Two rows, one column per step: the frames, and their saliency overlay (RGB uint8)."""
    top = upscale(to_hwc(frames), scale)
    bottom = upscale(overlay(frames, process(grad), target_step), scale)
    return np.concatenate([np.concatenate(list(top), 1), np.concatenate(list(bottom), 1)], 0)


def write_strip(path: Path, frames: np.ndarray, grad: np.ndarray, target_step: int, scale: int = 2) -> Path:
    """:func:`strip` as a PNG."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(strip(frames, grad, target_step, scale)).save(path)
    return path


def write_side_by_side(
    path: Path,
    frames: np.ndarray,
    grads: dict[str, np.ndarray],
    actions: np.ndarray,
    target_step: int,
    fps: float = 14,
    scale: int = 3,
) -> Path:
    """mp4: the frames with the agent's action, then one saliency panel per target, side by side."""
    panels = [
        [annotate(f, int(a), ["frame"]) for f, a in zip(upscale(to_hwc(frames), scale), actions, strict=True)]
    ]
    for name, grad in grads.items():
        big = upscale(overlay(frames, process(grad), target_step), scale)
        panels.append([annotate(f, None, [name]) for f in big])
    video = np.stack([np.concatenate(row, 1) for row in zip(*panels, strict=True)])
    return write_video(path, video, fps=fps)
