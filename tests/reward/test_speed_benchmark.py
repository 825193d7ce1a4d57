"""Smoke test of ``benchmarks/trex_speed.py`` at toy size: its JSON lines and their consistency (no timings)."""

import json

from support import benchmark


def test_prints_both_runs_and_the_speedup(tmp_path, capsys):
    module = benchmark("trex_speed")
    module.main(
        [
            "--num-demos",
            "6",
            "--test-demos",
            "3",
            "--budget",
            "0.01",
            "--run-root",
            str(tmp_path),
            "--parity-epoch-pairs",
            "4",
            "--batched-epoch-pairs",
            "64",
            "--common-args",
            "--arch atari --val-pairs 50 --test-pairs 50 --eval-pairs 50",
            "--batched-args",
            "--batch-size 64",
        ]
    )
    runs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    batched, parity, summary = runs
    assert (batched["mode"], parity["mode"]) == ("batched", "parity")
    assert (batched["batch_size"], parity["batch_size"], parity["lr"], parity["scale_input"]) == (
        64,
        1,
        5e-5,
        False,
    )
    assert batched["pairs_seen"] == 64 and parity["pairs_seen"] == 4  # one epoch each: the budget ran out
    target = summary["target_val_acc"]
    assert target == min(batched["best_val_acc"], parity["best_val_acc"])
    assert summary["speedup"] > 0 and batched["time_to_target_s"] <= batched["train_seconds"]
    assert summary["workload"] == "synthetic"
