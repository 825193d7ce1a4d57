"""The sweep's statistics: every (direction, arm) against the baseline on the same levels, corrected
for testing every direction.

Per edited variant and metric (return, level completion, episode length, each action's frequency,
the total-variation distance of the action distribution): the paired bootstrap 95 % CI of the
change over levels (:mod:`proclab.interpret.stats.paired`; one resample draw for every variant, so
their CIs are comparable), a paired permutation p-value, and, within each *family* (one arm and
one metric over the swept directions), p-values adjusted by Holm or Benjamini-Hochberg
(:mod:`proclab.stats.corrections`) with intervals at the matching corrected level. A change is
``significant`` when its adjusted p-value is at most ``alpha``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proclab.interpret.interventions.batched_play import Outcomes
from proclab.interpret.stats.paired import frequencies, frequency_boot, frequency_p, mean_boot, mean_p
from proclab.stats.bootstrap import interval, resamples, weights
from proclab.stats.corrections import adjust, interval_level
from proclab.stats.permutation import sign_flips

MEANS = ("return", "level_complete", "length")
"""Per-level quantities compared by their mean change."""
TV = "tv_distance"


@dataclass(frozen=True)
class Test:
    """One metric of one variant: the arms' values (None for TV), the estimate, its replicates, p."""

    baseline: float | None
    intervened: float | None
    estimate: float
    boot: np.ndarray
    p: float

    def report(self, ci95: list[float], corrected: list[float], p_adjusted: float, alpha: float) -> dict:
        head = (
            {"value": self.estimate}
            if self.baseline is None
            else {"baseline": self.baseline, "intervened": self.intervened, "change": self.estimate}
        )
        return {
            **head,
            "ci95": ci95,
            "ci_corrected": corrected,
            "p": self.p,
            "p_adjusted": float(p_adjusted),
            "significant": bool(p_adjusted <= alpha),
        }


def _tests(
    out: Outcomes, v: int, w: np.ndarray, s: np.ndarray, names: list[str], per_level: dict[str, np.ndarray]
) -> dict[str, Test]:
    """Variant ``v`` against variant 0 (the baseline), every metric."""
    tests = {}
    means = {"return": out.ret, "level_complete": out.complete, "length": out.length, **per_level}
    for metric, x in means.items():
        b, i = x[0], x[v]
        tests[metric] = Test(b.mean(), i.mean(), i.mean() - b.mean(), mean_boot(i - b, w), mean_p(b, i, s))
    cb, ci = out.actions[0], out.actions[v]
    fb, fi = frequencies(cb), frequencies(ci)
    change, tv_boot = frequency_boot(cb, ci, w)
    p_cat, p_tv = frequency_p(cb, ci, s)
    tests[TV] = Test(None, None, 0.5 * np.abs(fi - fb).sum(), tv_boot, p_tv)
    for k, name in enumerate(names):
        tests["action:" + name] = Test(fb[k], fi[k], fi[k] - fb[k], change[:, k], float(p_cat[k]))
    return tests


def compare(
    out: Outcomes,
    arm_of: list[str],
    names: list[str],
    *,
    bootstrap: int,
    permutations: int,
    correction: str,
    alpha: float,
    seed: int,
    per_level: dict[str, np.ndarray] | None = None,
) -> list[dict]:
    """Per variant ``v >= 1`` (``arm_of[v]`` its family: its arm, or another key for variants corrected
    apart, such as random directions; variant 0 is the baseline): its metrics as reported in the sweep's
    JSON (``return``, ``level_complete``, ``length``, ``tv_distance``, ``actions`` by name), corrected
    within each (family, metric). ``per_level`` adds ``(V, L)`` quantities compared by their mean change
    like return (same resamples, permutations and correction); one named ``GROUP:NAME`` is reported as
    ``[GROUP][NAME]`` (the deaths by cause: ``deaths:saw``)."""
    L = out.ret.shape[1]
    w = weights(resamples(L, bootstrap, seed), L)
    s = sign_flips(L, permutations, seed)
    extra = per_level or {}
    tests = [None] + [_tests(out, v, w, s, names, extra) for v in range(1, len(arm_of))]
    reports: list[dict] = [{} for _ in arm_of]
    for arm in dict.fromkeys(arm_of[1:]):
        members = [v for v in range(1, len(arm_of)) if arm_of[v] == arm]
        for metric in tests[members[0]]:
            family = [tests[v][metric] for v in members]
            adjusted = adjust([t.p for t in family], correction)
            level = interval_level(correction, alpha, len(members), int((adjusted <= alpha).sum()))
            boots = np.stack([t.boot for t in family])
            cis = zip(interval(boots), interval(boots, level), adjusted, strict=True)
            for v, t, (ci95, corrected, p_adj) in zip(members, family, cis, strict=True):
                reports[v][metric] = t.report(ci95, corrected, p_adj, alpha)
    for rep in reports[1:]:
        rep["actions"] = {name: rep.pop("action:" + name) for name in names}
        for key in extra:
            group, colon, name = key.partition(":")
            if colon:
                rep.setdefault(group, {})[name] = rep.pop(key)
    return reports[1:]


def halves(out: Outcomes, v: int) -> dict[str, list[float]]:
    """Variant ``v``'s change in return and TV distance on the even-indexed and on the odd-indexed levels
    apart: two independent measurements of one effect, whose agreement across edits is the noise
    ceiling of any prediction of the effects (:mod:`proclab.interpret.atlas.prediction`)."""
    out_halves: dict[str, list[float]] = {"return": [], TV: []}
    for part in (slice(0, None, 2), slice(1, None, 2)):
        out_halves["return"].append(float((out.ret[v, part] - out.ret[0, part]).mean()))
        fb, fi = frequencies(out.actions[0, part]), frequencies(out.actions[v, part])
        out_halves[TV].append(float(0.5 * np.abs(fi - fb).sum()))
    return out_halves


def baseline_summary(out: Outcomes, names: list[str]) -> dict:
    """The baseline's means and action frequencies (the reference every change is measured from)."""
    freq = frequencies(out.actions[0])
    return {
        "return": float(out.ret[0].mean()),
        "level_complete": float(out.complete[0].mean()),
        "length": float(out.length[0].mean()),
        "actions": {name: float(freq[k]) for k, name in enumerate(names)},
    }
