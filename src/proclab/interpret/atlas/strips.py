"""A moment as a picture: frames ``t - 4 .. t + 4`` side by side over the coordinate's trace.

The moment's own frame is outlined; steps before the episode's start or after its end are left
dark. Under the frames, the coordinate's value at each shown step is drawn as a line on the
coordinate's recorded range (its 0.5-99.5 % percentiles, so two strips of one direction share a
scale), with a grey line at zero when zero is in range and a dot at the moment.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from proclab.io.video import to_hwc, upscale

HALF = 4
"""Steps shown on each side of a moment."""
GAP, TRACE, MIN_SIDE = 2, 40, 64
OUTLINE = (255, 200, 0)


def window(length: int, step: int, half: int = HALF) -> tuple[int, int]:
    """Rows ``[lo, hi)`` of an episode of ``length`` steps shown around ``step`` (clipped to it)."""
    return max(0, step - half), min(length, step + half + 1)


def strip_image(
    frames: np.ndarray, first: int, step: int, trace: np.ndarray, scale: tuple[float, float], half: int = HALF
) -> np.ndarray:
    """``frames`` (rows ``first ..`` of an episode, ``(n, 3, H, W)`` uint8) and the coordinate ``trace``
    at those rows -> an RGB image of the ``2 half + 1`` steps around ``step``."""
    n, _, h, w = frames.shape
    zoom = max(1, MIN_SIDE // h)
    side_h, side_w = h * zoom, w * zoom
    slots = 2 * half + 1
    width = slots * side_w + (slots - 1) * GAP
    img = np.full((side_h + GAP + TRACE, width, 3), 24, np.uint8)
    big = upscale(to_hwc(frames), zoom)
    xs, ys = [], []
    lo, hi = scale
    span = hi - lo if hi > lo else 1.0
    for i in range(n):
        slot = first + i - (step - half)
        x0 = slot * (side_w + GAP)
        img[:side_h, x0 : x0 + side_w] = big[i]
        xs.append(x0 + side_w / 2)
        ys.append(side_h + GAP + (TRACE - 4) * (1 - np.clip((trace[i] - lo) / span, 0, 1)) + 2)
    img[side_h + GAP :] = 245
    pic = Image.fromarray(img)
    draw = ImageDraw.Draw(pic)
    if lo < 0 < hi:
        y0 = side_h + GAP + (TRACE - 4) * (1 - (0 - lo) / span) + 2
        draw.line([(0, y0), (width, y0)], fill=(180, 180, 180))
    draw.line(list(zip(xs, ys, strict=True)), fill=(20, 20, 20), width=2)
    centre = step - first
    x0 = half * (side_w + GAP)
    draw.rectangle([x0, 0, x0 + side_w - 1, side_h - 1], outline=OUTLINE, width=2)
    draw.ellipse([xs[centre] - 3, ys[centre] - 3, xs[centre] + 3, ys[centre] + 3], fill=(214, 39, 40))
    return np.asarray(pic)


def write_strip(path: Path, image: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image).save(path, optimize=True)
    return path
