"""Smoke test of ``benchmarks/trex_table.py`` on a planted grid CSV: per-cell means and stds, per-run rows."""

import csv
import json

import numpy as np

from proclab.reward.train import SUMMARY_COLUMNS
from support import benchmark


def test_cells_are_summarised_over_seeds_and_listed_per_run(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = []
    for n in (12, 300):
        for seed in range(3):
            row = {c: f"{rng.uniform(-1, 1):.4f}" for c in SUMMARY_COLUMNS}
            row.update(env_name="starpilot", num_dems=n, seed=seed, batch_size=256, test_demos=500, epochs=4)
            rows.append(row)
    path = tmp_path / "grid.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    table = benchmark("trex_table")
    table.main([str(path), "--runs"])
    out = capsys.readouterr().out
    cells = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [(c["num_demos"], c["runs"], c["mode"]) for c in cells] == [
        (12, 3, "batched"),
        (300, 3, "batched"),
    ]
    for cell in cells:
        v = np.array([float(r["partial_spearman"]) for r in rows if r["num_dems"] == cell["num_demos"]])
        assert cell["partial_spearman"] == [round(float(v.mean()), 3), round(float(v.std()), 3)]
        assert cell["published_spearman"] == list(table.PUBLISHED_STARPILOT[cell["num_demos"]])
    per_run = [
        line
        for line in out.splitlines()
        if line.startswith("| starpilot | batched |") and line.count("[") >= 5
    ]
    assert len(per_run) == 6
