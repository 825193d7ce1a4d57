"""Smoke test of ``benchmarks/wm_train_throughput.py``: the tiny size, checks the JSON lines (no timings)."""

import json

from support import benchmark


def test_prints_one_json_line_per_size_and_path(capsys):
    module = benchmark("wm_train_throughput")
    module.main(
        ["--sizes", "tiny", "--batch-size", "2", "--warmup", "0", "--repeats", "1", "--device", "cpu"]
    )
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["size"], r["path"]) for r in rows] == [("tiny", "fp32"), ("tiny", "optimised")]
    fp32, opt = rows
    assert fp32["precision"] == "fp32" and not fp32["channels_last"] and opt["channels_last"]
    assert (
        fp32["ratio_to_fp32"] == 1.0
        and abs(opt["ratio_to_fp32"] - opt["sequences_per_s"] / fp32["sequences_per_s"]) < 0.01
    )
    assert all(r["sequences_per_s"] > 0 and r["batch"] == 2 and r["window"] == 5 for r in rows)
