"""Smoke test of ``benchmarks/record_ground_truth.py``: tiny sizes, checks the JSON lines (no timings)."""

from __future__ import annotations

import json

from support import benchmark


def test_prints_rates_bytes_and_reader_cost(capsys):
    module = benchmark("record_ground_truth")
    args = (
        "--game bigfish --mode easy --agent interp-gru --num-envs 4 --steps 40 --rounds 2 --reader-states 8"
    )
    module.main([*args.split(), "--device", "cpu", "--threads", "1"])
    rate, plain, truth, reader = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert rate["benchmark"] == "record_ground_truth" and rate["plain_steps_per_s"] > 0
    assert abs(rate["ratio"] - rate["ground_truth_steps_per_s"] / rate["plain_steps_per_s"]) < 0.01
    assert plain["variant"] == "plain" and "features" not in plain["bytes_per_step"]
    if truth["stored_steps"]:  # an episode finished within the toy run
        assert truth["bytes_per_step"]["features"] > 0 and truth["bytes_per_step"]["initial_state"] > 0
    assert reader["fast_us_per_state"] > 0 and reader["definition_us_per_state"] > 0
