"""The mp4 writer: frames round-trip through the encoder, overlays draw, bad paths are refused."""

import numpy as np
import pytest

from proclab.envs import NUM_ACTIONS
from proclab.errors import ProclabError
from proclab.io.video import annotate, read_video, write_video


def test_video_round_trip_with_upscaling(tmp_path):
    t = np.linspace(0, 1, 12)[:, None, None, None]
    frames = (np.ones((12, 3, 64, 64)) * t * 255).astype(np.uint8)  # brightening grey ramp
    path = write_video(tmp_path / "sub" / "clip.mp4", frames, fps=10, scale=2)
    back = read_video(path)
    assert back.shape == (12, 128, 128, 3)
    means = back.reshape(12, -1).mean(1)
    assert np.all(np.diff(means) > 0)  # order and content survive lossy coding
    assert np.abs(means - t.ravel() * 255).max() < 8
    assert not list(tmp_path.glob("**/*.partial.mp4"))


def test_every_action_overlay_changes_the_frame():
    blank = np.zeros((128, 128, 3), np.uint8)
    drawn = [annotate(blank, a) for a in range(NUM_ACTIONS)]
    assert all(d.any() for d in drawn)
    assert not np.array_equal(drawn[1], drawn[7])  # left and right arrows differ
    assert annotate(blank, None, ["value 1.0"]).any()


def test_bad_video_paths(tmp_path):
    with pytest.raises(ProclabError, match=r"must end in \.mp4"):
        write_video(tmp_path / "clip.avi", np.zeros((2, 64, 64, 3), np.uint8))
    with pytest.raises(ProclabError, match="no frames"):
        write_video(tmp_path / "clip.mp4", np.zeros((0, 64, 64, 3), np.uint8))
