"""`proclab wm loss-over-time`: per-step errors with a [min, max] band, JSON and plot."""

import json

import numpy as np

from proclab.cli import main as cli
from proclab.worldmodel.loss_over_time import summarise


def test_band_is_the_min_and_max_of_the_batch_means():
    per_batch = np.array([[1.0, 4.0, np.nan], [3.0, 2.0, np.nan], [2.0, np.nan, np.nan]])
    s = summarise(per_batch)
    assert s["mean"] == [2.0, 3.0, None] and s["min"] == [1.0, 2.0, None] and s["max"] == [3.0, 4.0, None]
    assert s["batches"] == [3, 2, 0]


def test_loss_over_time_command(trained_run, tmp_path, capsys):
    out = tmp_path / "lot"
    cli(
        [
            "wm",
            "loss-over-time",
            str(trained_run),
            "--batches",
            "3",
            "--batch-size",
            "2",
            "--steps",
            "6",
            "--actions",
            "agent",
            "--out",
            str(out),
            "--device",
            "cpu",
        ]
    )
    assert "loss_over_time.png" in capsys.readouterr().out
    result = json.loads((out / "loss_over_time.json").read_text())
    assert (out / "loss_over_time.png").stat().st_size > 0
    assert result["steps"] == 6 and result["actions"] == "agent"
    expected = {
        "image",
        "reward",
        "done",
        "agent_state",
        "kl",
        "env_update",
        "value",
        "policy_kl",
        "action_mismatch",
    }
    assert set(result["quantities"]) == expected
    for name, q in result["quantities"].items():
        assert len(q["mean"]) == 6 and all(0 <= n <= 3 for n in q["batches"]), name
        for lo, mean, hi in zip(q["min"], q["mean"], q["max"], strict=True):
            assert lo is None or lo <= mean + 1e-9 <= hi + 2e-9, name
    assert result["quantities"]["image"]["batches"][0] == 3  # the first simulated frame always exists
