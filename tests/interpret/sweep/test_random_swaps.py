"""The swaps' control (``--random-swaps``): pairs drawn as stated, ranks and Monte-Carlo p-values against a
slow count written here, planted sweeps where the chosen swap is special and where it is not, and the
control inside the sweep (same levels, its own family)."""

import numpy as np
import pytest

from planted import KEY, Corridor, PlantedAgent
from planted import planted_recorded as planted
from proclab.errors import ProclabError
from proclab.interpret.sweep.grid import SweepSettings, sweep
from proclab.interpret.sweep.random_swaps import draw_pairs, rank_against_random, swap_control
from proclab.run.runtime import make_runtime
from proclab.stats.bootstrap import resamples
from proclab.stats.corrections import holm

RT = make_runtime("cpu", "fp32", 1)


def test_pairs_are_distinct_unordered_and_never_a_chosen_one():
    pairs = draw_pairs(6, 12, 0, [(3, 1), (0, 5)])
    assert len(set(pairs)) == 12 and all(i < j < 6 for i, j in pairs)
    assert (1, 3) not in pairs and (0, 5) not in pairs
    assert pairs == draw_pairs(6, 12, 0, [(1, 3), (5, 0)]) and pairs != draw_pairs(6, 12, 1, [(1, 3), (5, 0)])
    assert sorted(draw_pairs(6, 13, 0, [(1, 3), (0, 5)])) == sorted(
        {(i, j) for i in range(6) for j in range(i + 1, 6)} - {(1, 3), (0, 5)}
    )
    with pytest.raises(ProclabError, match="only 13 pairs besides the chosen swaps"):
        draw_pairs(6, 14, 0, [(1, 3), (0, 5)])
    # every pair equally likely: over many seeds each of the 15 pairs is drawn about 15 * 3/15 times in 5 draws
    counts = np.zeros((6, 6))
    for seed in range(600):
        for i, j in draw_pairs(6, 3, seed, []):
            counts[i, j] += 1
    drawn = counts[np.triu_indices(6, 1)]
    assert drawn.sum() == 1800 and drawn.min() > 90 and drawn.max() < 150  # expectation 120 each


def _slow(baseline, chosen, random, idx):
    """The control by hand: a loop per random pair, and per bootstrap replicate re-indexed levels."""
    change = chosen.mean() - baseline.mean()
    others = [r.mean() - baseline.mean() for r in random]
    larger = sum(o > change for o in others)
    at_least = sum(o >= change for o in others)
    at_most = sum(o <= change for o in others)
    n = len(others)
    ranks, beyond = [], []
    for rows in idx:
        c = np.mean(chosen[rows] - baseline[rows])
        o = [np.mean(r[rows] - baseline[rows]) for r in random]
        ranks.append(1 + sum(x > c for x in o))
        beyond.append(c - np.mean(o))
    return {
        "change": change,
        "rank": 1 + larger,
        "p_upper": (at_least + 1) / (n + 1),
        "p_lower": (at_most + 1) / (n + 1),
        "beyond": change - np.mean(others),
        "beyond_ci": np.percentile(beyond, [2.5, 97.5]),
        "rank_ci": [int(np.floor(np.percentile(ranks, 2.5))), int(np.ceil(np.percentile(ranks, 97.5)))],
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ranks_and_p_values_match_a_slow_count(seed):
    rng = np.random.default_rng(seed)
    L, n = 60, 9
    baseline = rng.integers(0, 2, L).astype(float)
    chosen = rng.integers(0, 2, L).astype(float)
    random = rng.integers(0, 2, (n, L)).astype(float)
    random[3] = chosen  # a tie: counted against the chosen pair in both tails, not in the rank
    got = rank_against_random(baseline, chosen, random, bootstrap=300, seed=seed)
    ref = _slow(baseline, chosen, random, resamples(L, 300, seed))
    assert got.rank == ref["rank"] and got.of == n + 1
    assert got.p_upper == pytest.approx(ref["p_upper"]) and got.p_lower == pytest.approx(ref["p_lower"])
    assert got.p_two_sided == pytest.approx(min(1, 2 * min(ref["p_upper"], ref["p_lower"])))
    assert got.change == pytest.approx(ref["change"]) and got.beyond_random == pytest.approx(ref["beyond"])
    np.testing.assert_allclose(got.beyond_random_ci95, ref["beyond_ci"])
    assert got.rank_ci95 == ref["rank_ci"]


def _deaths(rng, L, rate):
    return (rng.random(L) < rate).astype(float)


def test_a_special_swap_ranks_first_and_one_like_the_others_does_not():
    """Planted per-level deaths: every swap of a random pair raises deaths from 5 % to 8-12 % (any swap
    hurts the agent); the special one to 25 %. The special swap is first of 21, p = 1/21. A chosen swap
    that is just another pair is judged significant by its paired test against the baseline (the old
    reading) in almost every world, but the control finds it special only about as often as its level
    (1/21 of worlds, at p <= 0.05)."""
    L, n = 1000, 20
    rng = np.random.default_rng(0)
    baseline = _deaths(rng, L, 0.05)
    random = np.stack([_deaths(rng, L, rng.uniform(0.08, 0.12)) for _ in range(n)])
    special = rank_against_random(baseline, _deaths(rng, L, 0.25), random, bootstrap=200, seed=0)
    assert special.rank == 1 and special.p_upper == pytest.approx(1 / 21) and special.rank_ci95 == [1, 1]
    assert special.beyond_random_ci95[0] > 0.1
    flagged_old, flagged_control, worlds = 0, 0, 300
    for w in range(worlds):
        rng = np.random.default_rng(100 + w)
        base = _deaths(rng, L, 0.05)
        pairs = np.stack([_deaths(rng, L, rng.uniform(0.08, 0.12)) for _ in range(n + 1)])
        chosen, others = pairs[0], pairs[1:]
        diff = chosen - base
        boot = diff[resamples(L, 200, w)].mean(axis=1)
        flagged_old += np.percentile(boot, 2.5) > 0
        flagged_control += rank_against_random(base, chosen, others, bootstrap=20, seed=w).p_upper <= 0.05
    assert flagged_old / worlds > 0.8
    assert flagged_control / worlds < 0.1  # 1/21 = 0.048 expected; 0.1 is 3 standard errors above it


def test_two_sided_p_values_are_holm_adjusted_over_metrics_and_chosen_swaps():
    rng = np.random.default_rng(4)
    per_level = {"a": rng.normal(size=(8, 40)), "b": rng.normal(size=(8, 40))}
    per_level["a"][1] += 1.0  # the first chosen swap's "a" is far above every random pair
    out = swap_control(per_level, [1, 2], [3, 4, 5, 6, 7], [(0, 1), (2, 3)], bootstrap=50, seed=0)
    assert [c["swap"] for c in out] == [[0, 1], [2, 3]] and out[0]["random_pairs"] == 5
    rows = [c["metrics"][m] for c in out for m in ("a", "b")]
    np.testing.assert_allclose([r["p_adjusted"] for r in rows], holm([r["p_two_sided"] for r in rows]))
    assert out[0]["metrics"]["a"]["rank"] == 1 and out[0]["metrics"]["a"]["p_upper"] == pytest.approx(1 / 6)


def test_the_sweeps_control_plays_the_random_pairs_as_swaps_on_the_same_levels():
    """The random pairs are played exactly as if they were named with --swaps (same levels, episodes and
    seeds), are corrected apart (the chosen swaps' reports are those of a sweep without them), and the
    control ranks the chosen swap's changes among theirs."""
    coords, rec = planted()
    levels = np.arange(2000, 2024)
    common = dict(levels=24, rows=96, permutations=199, bootstrap=100, arms="mean")
    args = SweepSettings(**common, random_swaps=3, swaps="0:1")
    summary, out, _ = sweep(PlantedAgent(), coords, KEY, rec, Corridor(96), levels, [], args, RT)
    drawn = [tuple(s["swap"]) for s in summary["swaps"] if s["random"]]
    assert drawn == draw_pairs(coords.k, 3, 0, [(0, 1)]) and not summary["swaps"][0]["random"]
    named = SweepSettings(**common, swaps=",".join(f"{i}:{j}" for i, j in [(0, 1), *drawn]))
    _, out_named, _ = sweep(PlantedAgent(), coords, KEY, rec, Corridor(96), levels, [], named, RT)
    np.testing.assert_array_equal(out.ret, out_named.ret)
    np.testing.assert_array_equal(out.length, out_named.length)
    alone = sweep(
        PlantedAgent(), coords, KEY, rec, Corridor(96), levels, [], SweepSettings(**common, swaps="0:1"), RT
    )
    assert summary["swaps"][0]["length"] == alone[0]["swaps"][0]["length"]
    control = summary["swap_control"]
    assert len(control) == 1 and control[0]["swap"] == [0, 1]
    length = control[0]["metrics"]["length"]
    changes = out.length.mean(axis=1) - out.length[0].mean()
    assert length["change"] == pytest.approx(changes[1])
    assert length["random_changes"] == pytest.approx(list(changes[2:]))
    assert length["rank"] == 1 + int(np.sum(changes[2:] > changes[1]))


def test_random_swaps_need_chosen_swaps_and_a_count_of_zero_or_more():
    with pytest.raises(ProclabError, match="--random-swaps is the control of the chosen --swaps"):
        SweepSettings(random_swaps=20).check()
    with pytest.raises(ProclabError, match="--random-swaps must be >= 0"):
        SweepSettings(random_swaps=-1, swaps="0:1").check()
