"""``benchmarks/trex_policies.py`` on planted policy runs: the first/last-10% windows and the Holm adjustment
against slow references written here, the exact permutation p (tested in tests/stats) of the right values;
unfinished runs are left out."""

import csv
import json

import numpy as np
import pytest

from proclab.stats.permutation import exact_permutation_p
from support import benchmark

STEPS = 2_000


def write_run(root, arm, seed, rng, steps=STEPS, level=0.0):
    run = root / f"{arm}-s{seed}" / f"{seed}-20261128-000000"
    run.mkdir(parents=True)
    with open(run / "metrics.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["step", "charts/episodic_return", "charts/episodic_length", "charts/proxy_episodic_return"]
        )
        for step in range(100, steps + 1, 100):
            ret = "" if step == 1_900 else f"{level + rng.normal():.4f}"  # a row with no finished episode
            proxy = f"{rng.uniform():.4f}" if arm != "true-reward" else ""
            writer.writerow([step, ret, f"{50 + rng.normal(0, 5):.2f}", proxy])
    return run


def reference_window(path, key, lo_share, hi_share):
    with open(path / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    end = max(float(r["step"]) for r in rows)
    picked = [
        float(r[key]) for r in rows if lo_share * end < float(r["step"]) <= hi_share * end and r[key] != ""
    ]
    return sum(picked) / len(picked)


def reference_holm(p):
    order = sorted(range(len(p)), key=lambda i: p[i])
    adjusted, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def test_windows_match_a_row_by_row_mean(tmp_path):
    module = benchmark("trex_policies")
    run = write_run(tmp_path, "trex", 1, np.random.default_rng(0))
    w = module.windows(module.read_metrics(run))
    assert w["steps"] == STEPS
    for name, key in module.MEASURES.items():
        for part, (lo, hi) in (("first", (0.0, 0.1)), ("last", (0.9, 1.0))):
            assert w[f"{name}_{part}"] == pytest.approx(reference_window(run, key, lo, hi))


def test_table_leaves_out_unfinished_runs_and_holm_adjusts_the_six_tests(tmp_path, capsys):
    module = benchmark("trex_policies")
    rng = np.random.default_rng(1)
    levels = {"trex": 1.0, "true-reward": 3.0, "per-step": 1.0}
    for arm, level in levels.items():
        for seed in (1, 2, 3):
            write_run(tmp_path, arm, seed, rng, level=level)
    write_run(tmp_path, "trex", 4, rng, steps=STEPS // 2, level=levels["trex"])  # still training: left out
    module.main([str(tmp_path), "--steps", str(STEPS), "--plot", str(tmp_path / "arms.png")])
    out = capsys.readouterr().out
    tests = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [(t["arms"], t["measure"]) for t in tests] == [
        (list(pair), measure) for pair in module.PAIRS for measure in ("true", "length")
    ]
    assert all(t["seeds"] == [3, 3] for t in tests)
    for t in tests:
        values = [
            [
                reference_window(run.parent, module.MEASURES[t["measure"]], 0.9, 1.0)
                for run in sorted(tmp_path.glob(f"{arm}-s[123]/*/metrics.csv"))
            ]
            for arm in t["arms"]
        ]
        assert t["p"] == pytest.approx(exact_permutation_p(*values))
    assert [t["p_holm"] for t in tests] == pytest.approx(reference_holm([t["p"] for t in tests]))
    assert "trex-s4" not in out
    assert (tmp_path / "arms.png").stat().st_size > 0
