"""The example scripts run top to bottom on the agents proclab ships, with the checks they make themselves
(``examples/five_experiments.py`` asserts that every cached activation equals an independent forward pass
within 1e-5 and that a patched policy is the heads of the patched state)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_five_experiments_run_on_the_shipped_agents():
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "five_experiments.py"), "--episodes", "8", "--levels", "6"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert [line.split(".")[0] for line in lines if line[:2] in {"1.", "2.", "3.", "4.", "5."}] == [
        "1", "1", "2", "3", "3", "4", "5", "5"
    ]  # fmt: skip
    assert "largest difference" in done.stdout
