"""The swaps' control (``--random-swaps N``): where a chosen swap falls among swaps of random pairs.

A swap of two directions of the agent's state changes how it plays, and so does almost any edit of that
size: "swapping the saw tracker with the crate tracker raises deaths on saws" is only evidence about
*those* directions if a swap of two directions nobody chose does not do the same. So the sweep plays, on
the same paired levels, episodes and seeds as the chosen swaps, ``N`` pairs of directions of the same
basis drawn uniformly at random (distinct, unordered, none of them a chosen pair; corrected in a family of
their own, so the chosen swaps' tests are those of a sweep without them), and for each chosen swap and each
per-level metric (return, completion, length, deaths by cause) reports:

- its change against the baseline, and its **rank** among itself and the ``N`` random pairs' changes
  (1: the largest);
- the empirical p-values of the Monte-Carlo test with the ``(k + 1) / (N + 1)`` rule (``k``: random pairs
  whose change is at least as large, or at least as small, as the chosen one's; ties count against the
  chosen pair), and the two-sided ``min(1, 2 min(upper, lower))``, Holm-adjusted over the metrics and
  chosen swaps reported together;
- the 2.5-97.5 % range of the random pairs' changes, the chosen change minus their mean with a paired
  bootstrap 95 % interval over levels, and a 95 % interval of the rank over the same level resamples.

With ``N`` random pairs no p-value falls below ``1 / (N + 1)``: 20 pairs can say at most p = 0.048.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from proclab.errors import ProclabError
from proclab.interpret.stats.paired import mean_boot
from proclab.stats.bootstrap import interval, resamples, weights
from proclab.stats.corrections import adjust
from proclab.stats.permutation import permutation_p


def draw_pairs(k: int, n: int, seed: int, exclude: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``n`` distinct unordered pairs ``(i, j)``, ``i < j``, of ``k`` directions, uniformly without
    replacement among the pairs not in ``exclude`` (in either order); one line when there are too few."""
    if n <= 0:
        return []
    taken = {tuple(sorted(p)) for p in exclude}
    pool = [(i, j) for i in range(k) for j in range(i + 1, k) if (i, j) not in taken]
    if n > len(pool):
        raise ProclabError(
            f"--random-swaps {n}: a basis of {k} directions has only {len(pool)} pairs besides the chosen swaps"
        )
    rng = np.random.default_rng([seed, 17])
    return [pool[int(t)] for t in rng.choice(len(pool), n, replace=False)]


@dataclass(frozen=True)
class SwapRank:
    """One chosen swap and one metric against the random pairs' swaps (changes are intervened minus
    baseline, means over the paired levels)."""

    change: float
    random_changes: list[float]
    rank: int
    """1 + the random pairs whose change is strictly larger: 1 is the largest of all."""
    of: int
    """The swaps ranked: the chosen one and the random pairs."""
    p_upper: float
    p_lower: float
    p_two_sided: float
    random_range: list[float]
    """The 2.5 and 97.5 percentiles of the random pairs' changes."""
    beyond_random: float
    """The chosen change minus the random pairs' mean change."""
    beyond_random_ci95: list[float]
    rank_ci95: list[int]


def rank_against_random(
    baseline: np.ndarray, chosen: np.ndarray, random: np.ndarray, *, bootstrap: int, seed: int
) -> SwapRank:
    """Where the chosen swap's per-level values ``chosen`` (``(L,)``) fall among the random pairs'
    ``random`` (``(N, L)``), each compared with the ``baseline`` on the same ``L`` paired levels."""
    baseline, chosen, random = (np.asarray(x, np.float64) for x in (baseline, chosen, random))
    if random.ndim != 2 or random.shape[0] < 1:
        raise ProclabError("the random-pair control needs at least one random pair")
    change = float(chosen.mean() - baseline.mean())
    others = random.mean(axis=1) - baseline.mean()
    n = len(others)
    upper, lower = permutation_p(change, others), permutation_p(-change, -others)
    w = weights(resamples(len(baseline), bootstrap, seed), len(baseline))
    boot_chosen = mean_boot(chosen - baseline, w)  # (B,)
    boot_random = (w @ (random - baseline).T) / len(baseline)  # (B, N)
    ranks = 1 + np.sum(boot_random > boot_chosen[:, None], axis=1)
    lo, hi = np.percentile(ranks, [2.5, 97.5])
    return SwapRank(
        change=change,
        random_changes=[float(x) for x in others],
        rank=1 + int(np.sum(others > change)),
        of=n + 1,
        p_upper=upper,
        p_lower=lower,
        p_two_sided=min(1.0, 2 * min(upper, lower)),
        random_range=[float(x) for x in np.percentile(others, [2.5, 97.5])],
        beyond_random=float(change - others.mean()),
        beyond_random_ci95=interval(boot_chosen - boot_random.mean(axis=1)),
        rank_ci95=[int(np.floor(lo)), int(np.ceil(hi))],
    )


def swap_control(
    per_level: dict[str, np.ndarray],
    chosen: list[int],
    random: list[int],
    pairs: list[tuple[int, int]],
    *,
    bootstrap: int,
    seed: int,
) -> list[dict]:
    """For every chosen swap (variant ids ``chosen``, exchanging ``pairs``) and every metric of
    ``per_level`` (``(V, L)``, variant 0 the baseline), its :class:`SwapRank` against the variants
    ``random``, with the two-sided p-values Holm-adjusted over all of them."""
    ranked = {
        (c, metric): rank_against_random(x[0], x[c], x[random], bootstrap=bootstrap, seed=seed)
        for c in chosen
        for metric, x in per_level.items()
    }
    adjusted = adjust([r.p_two_sided for r in ranked.values()], "holm")
    out = []
    for c, pair in zip(chosen, pairs, strict=True):
        metrics = {
            metric: asdict(r) | {"p_adjusted": float(p)}
            for ((v, metric), r), p in zip(ranked.items(), adjusted, strict=True)
            if v == c
        }
        out.append({"swap": list(pair), "random_pairs": len(random), "metrics": metrics})
    return out
