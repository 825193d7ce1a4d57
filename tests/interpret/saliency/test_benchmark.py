"""Smoke test of ``benchmarks/saliency_throughput.py``: the tiny size, checks the JSON lines (no timings)."""

import json

from support import benchmark


def test_prints_one_json_line_per_mode(capsys):
    module = benchmark("saliency_throughput")
    module.main(
        [
            "--sizes",
            "tiny",
            "--batch",
            "2",
            "--steps",
            "4",
            "--step",
            "2",
            "--smooth-noise",
            "1",
            "--warmup",
            "0",
            "--repeats",
            "1",
        ]
    )
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["mode"] for r in rows] == ["simulate", "saliency", "smoothgrad"]
    assert rows[0]["ratio_to_simulate"] == 1.0 and rows[2]["copies"] == 2 and rows[1]["targets"] == 2
    assert all(r["samples_per_s"] > 0 and r["size"] == "tiny" for r in rows)
    assert abs(rows[1]["ratio_to_simulate"] - rows[1]["samples_per_s"] / rows[0]["samples_per_s"]) < 0.01
