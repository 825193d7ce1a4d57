"""`--time-limit`: PPO stops after the update that crosses the wall-clock budget, with a checkpoint."""

from pathlib import Path

from proclab.io.run_dirs import read_metrics
from support import TINY_FLAGS, TINY_PPO, proclab

TINY = [*TINY_PPO, "--val-num-envs", "0", "--device", "cpu", *TINY_FLAGS]


def test_a_time_limit_stops_after_the_first_update_that_crosses_it(tmp_path: Path):
    proc = proclab(
        "train", *TINY, "--total-steps", "100000", "--time-limit", "0.001", "--run-root", str(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr
    (run,) = [p for p in tmp_path.glob("ppo/*/*/*") if p.is_dir()]
    assert [p.name for p in (run / "checkpoints").glob("step_*")] == ["step_000000000128"]
    assert read_metrics(run / "metrics.csv")["step"] == [128]
