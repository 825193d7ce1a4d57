"""Smoke test of ``benchmarks/agent_throughput.py``: tiny sizes, checks the JSON lines (no timings)."""

from __future__ import annotations

import json

from support import benchmark


def test_prints_one_json_line_per_measurement(capsys):
    module = benchmark("agent_throughput")
    args = (
        "--cores none,sr_delta --repeats 1 --warmup 0 --infer-batch 2 --train-batch 4 --unroll 2 --device cpu"
    )
    module.main(args.split())
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2 * 2 * 2  # cores x modes x precisions
    keys = {(r["core"], r["mode"], r["precision"]) for r in rows}
    assert ("sr_delta", "train", "bf16+channels_last") in keys and ("none", "inference", "fp32") in keys
    for r in rows:
        assert r["samples_per_s"] > 0
        assert (r["batch"], r["unroll"]) == ((2, 1) if r["mode"] == "inference" else (2, 2))
        if r["precision"] == "fp32":
            assert r["ratio_to_fp32"] == 1.0
        else:
            base = next(
                b for b in rows if (b["core"], b["mode"], b["precision"]) == (r["core"], r["mode"], "fp32")
            )
            assert (
                abs(r["ratio_to_fp32"] - r["samples_per_s"] / base["samples_per_s"])
                < 0.01 * r["ratio_to_fp32"] + 1e-3
            )
