"""Smoke test of ``benchmarks/trex_demos.py`` on a synthetic demo store: its rows match the store."""

import json

import numpy as np
from scipy.stats import spearmanr

from proclab.reward.record_demos import write_synthetic_demos
from proclab.store import EpisodeStore
from support import benchmark


def test_rows_per_split_and_checkpoint_match_the_store(tmp_path, capsys):
    store = write_synthetic_demos(tmp_path / "store", num_train=12, num_test=8)
    benchmark("trex_demos").main([str(store)])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    t = EpisodeStore(store).episodes
    splits, returns, lengths = np.asarray(t["split"]), np.asarray(t["return"]), np.asarray(t["length"])
    by_split = {r["split"]: r for r in rows if "split" in r}
    assert {s: r["demos"] for s, r in by_split.items()} == {"test": 8, "train": 12}
    for split, r in by_split.items():
        m = splits == split
        assert r["return_mean"] == round(float(returns[m].mean()), 2)
        assert r["spearman_length_return"] == round(float(spearmanr(lengths[m], returns[m])[0]), 3)
    assert sum(r["demos"] for r in rows if "checkpoint_step" in r) == 20
