"""`proclab quickstart` runs end to end and leaves a playable video."""

from proclab.cli import main
from proclab.io.video import read_video


def test_quickstart_writes_a_video(tmp_path, capsys):
    main(["quickstart", "--out", str(tmp_path), "--steps", "30", "--num-envs", "2"])
    frames = read_video(tmp_path / "random_agent.mp4")
    assert frames.shape == (31, 256, 256, 3)
    assert str(tmp_path) in capsys.readouterr().out
