"""Write frame sequences to mp4, with optional upscaling and overlays.

Encoding goes through imageio's PyAV plugin (libx264, yuv420p, so any player opens the file), in
memory, and the file is written whole or not at all (:func:`proclab.io.files.write_bytes`).
procgen's own dependency gym3 pins ``imageio-ffmpeg < 0.4``, whose loader needs the removed
``pkg_resources``; PyAV wheels bundle their own ffmpeg libraries and avoid that conflict.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import imageio.v3 as iio
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from proclab.envs.actions import ACTIONS
from proclab.errors import ProclabError
from proclab.io.files import write_bytes


def to_hwc(frames: np.ndarray) -> np.ndarray:
    """(T, 3, H, W) or (T, H, W, 3) uint8 -> (T, H, W, 3)."""
    frames = np.asarray(frames)
    if frames.ndim != 4:
        raise ValueError(f"expected frames of shape (T, H, W, 3) or (T, 3, H, W), got {frames.shape}")
    if frames.shape[-1] != 3 and frames.shape[1] == 3:
        frames = frames.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(frames)


def upscale(frames: np.ndarray, factor: int) -> np.ndarray:
    """Nearest-neighbour upscaling of (T, H, W, C) frames: crisp pixels, no blur."""
    if factor == 1:
        return frames
    return frames.repeat(factor, axis=1).repeat(factor, axis=2)


@lru_cache(maxsize=8)
def _font(size: int):
    return ImageFont.load_default(size=size)


def annotate(
    frame: np.ndarray, action: int | None = None, lines: Sequence[str] = (), arrow_size: int | None = None
) -> np.ndarray:
    """Draw the action as an arrow at the top centre and ``lines`` of text at the bottom left.

    Direction actions get an arrow; no-op gets a ring; the D/A/W/S/Q/E buttons get their letter.
    """
    h, w = frame.shape[:2]
    img = Image.fromarray(frame)
    draw = ImageDraw.Draw(img)
    if action is not None:
        size = arrow_size or max(8, h // 8)
        cx, cy = w // 2, size // 2 + 2
        act = ACTIONS[int(action)]
        if act.dx or act.dy:
            norm = float(np.hypot(act.dx, act.dy))
            ux, uy = act.dx / norm, -act.dy / norm  # image y points down
            half = size / 2
            tail, tip = (cx - ux * half, cy - uy * half), (cx + ux * half, cy + uy * half)
            px, py = -uy, ux  # perpendicular
            head = size / 3
            base = (tip[0] - ux * head, tip[1] - uy * head)
            wing = head / 1.6
            triangle = [
                tip,
                (base[0] + px * wing, base[1] + py * wing),
                (base[0] - px * wing, base[1] - py * wing),
            ]
            width = max(1, size // 6)
            draw.line(
                [tail, base], fill=(0, 0, 0), width=width + 2
            )  # dark outline: visible on any background
            draw.polygon(triangle, fill=(255, 255, 255), outline=(0, 0, 0))
            draw.line([tail, base], fill=(255, 255, 255), width=width)
        elif act.keys:
            draw.text((cx, cy), act.name, fill=(255, 255, 255), anchor="mm", font=_font(size))
        else:
            r = size / 4
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], outline=(255, 255, 255), width=max(1, size // 8))
    if lines:
        font_size = max(8, h // 20)
        y = h - 2 - font_size * len(lines)
        for line in lines:
            draw.text(
                (3, y), line, fill=(255, 255, 0), font=_font(font_size), stroke_width=1, stroke_fill=(0, 0, 0)
            )
            y += font_size
    return np.asarray(img)


def write_video(
    path: str | Path,
    frames: np.ndarray,
    fps: float = 15,
    scale: int = 1,
    actions: Sequence[int] | np.ndarray | None = None,
    captions: Sequence[Sequence[str]] | None = None,
) -> Path:
    """Encode ``frames`` as an H.264 mp4 at ``path`` and return the path.

    ``scale`` upscales each frame (nearest neighbour) before the overlays are drawn, so text
    stays legible; ``actions[t]`` draws an arrow on frame t, ``captions[t]`` lines of text.
    """
    path = Path(path)
    if path.suffix.lower() != ".mp4":
        raise ProclabError(f"video path {str(path)!r} must end in .mp4")
    frames = upscale(to_hwc(frames), scale)
    if len(frames) == 0:
        raise ProclabError(f"no frames to write to {path}")
    if actions is not None or captions is not None:
        frames = np.stack(
            [
                annotate(
                    f,
                    None if actions is None else int(actions[t]),
                    () if captions is None else captions[t],
                )
                for t, f in enumerate(frames)
            ]
        )
    h, w = frames.shape[1:3]
    if h % 2 or w % 2:  # yuv420p needs even sizes
        frames = np.pad(frames, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)))
    data = iio.imwrite(
        "<bytes>",
        frames,
        plugin="pyav",
        extension=".mp4",
        fps=fps,
        codec="libx264",
        out_pixel_format="yuv420p",
    )
    return write_bytes(path, data, "video")  # whole or not at all, under the real name


def read_video(path: str | Path) -> np.ndarray:
    """Decode an mp4 into (T, H, W, 3) uint8 frames (used by tests and tools)."""
    return iio.imread(Path(path), plugin="pyav")
