"""`proclab quickstart` runs every stage end to end (at a minimal size) and leaves its outputs."""

import json

from proclab.cli import main
from proclab.data import EpisodeStore
from proclab.io.video import read_video


def test_quickstart_runs_every_stage(tmp_path, capsys):
    main(["quickstart", "--out", str(tmp_path), "--train-steps", "2048", "--eval-episodes", "2",
          "--render-steps", "60", "--game", "bossfight", "--record-episodes", "3", "--wm-updates", "2",
          "--wm-samples", "1"])  # fmt: skip
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["eval"]) == {"train", "test1"}
    assert json.loads((tmp_path / "eval.json").read_text())["rows"][0]["episodes"] == 2
    assert 1 <= len(read_video(tmp_path / "agent.mp4")) <= 60
    assert (tmp_path / "curves.png").stat().st_size > 10_000
    assert list((tmp_path / "runs").glob("ppo/bossfight/quickstart/*/checkpoints/step_*"))
    assert EpisodeStore(summary["episodes"]).num_episodes == 3
    assert list((tmp_path / "runs").glob("wm/*/quickstart/*/checkpoints/*"))
    assert EpisodeStore(summary["samples"]).num_episodes == 1
    assert list((tmp_path / "samples" / "videos").glob("*.mp4"))
    page = (tmp_path / "index.html").read_text()
    assert "curves.png" in page and "agent.mp4" in page and "test1" in page
    assert str(tmp_path.resolve()) in capsys.readouterr().out.replace("\n", "")
