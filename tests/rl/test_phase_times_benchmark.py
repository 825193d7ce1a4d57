"""Smoke test of ``benchmarks/ppo_phase_times.py`` on a tiny CPU setting: the phases add up (no timings asserted)."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "ppo_phase_times.py"


def test_phases_are_parts_of_the_update(capsys):
    spec = importlib.util.spec_from_file_location("ppo_phase_times", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--preset", "tiny", "--device", "cpu", "--precision", "fp32", "--updates", "1",
                 "--num-envs", "4", "--num-steps", "16", "--env-threads", "1", "2"])  # fmt: skip
    phases, *envs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert phases["sps"] > 0
    assert phases["rollout"] >= phases["env_step"] + phases["inference"] - 1e-4
    assert phases["rollout"] + phases["learner"] <= phases["wall_per_update_s"] + 1e-3
    assert [e["env_threads"] for e in envs] == [1, 2] and all(e["sps"] > 0 for e in envs)
