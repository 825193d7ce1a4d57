"""Equivalence: "no effect" claimed only where it was shown, by two one-sided tests (TOST).

A sweep's significance test asks whether an edit changed a metric; failing to show a change is not
showing its absence (too few levels fail to show anything). TOST (Schuirmann 1987) reverses the
hypotheses: with a stated margin ``m``, the null is "the mean paired change is at least ``m`` in size",
and rejecting both one-sided nulls ``mu <= -m`` and ``mu >= m`` at level ``alpha`` shows the change
lies within ``(-m, m)``. Its p-value is the larger of the two one-sided p-values, and it rejects
exactly when the ``1 - 2 alpha`` confidence interval of the mean change lies inside the margin.

The one-sided tests are paired t-tests over levels (the per-level differences of a sweep are
bounded, so at the sweep's hundreds of levels their mean is close to normal). When every level's
difference is the same (a direction read by nothing changes no episode) the standard error is zero
and the mean itself decides: inside the margin is shown (p = 0), outside is not (p = 1).

Per direction, "no effect on return" needs every arm's TOST to reject: an intersection-union test,
valid at ``alpha`` without any correction (Berger 1982), so it is the strict counterpart of the
per-claim test of :mod:`proclab.interpret.stats.claims`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

EFFECT = "effect"
EQUIVALENT = "no effect (equivalent within ±{margin:g})"
UNDECIDED = "not shown either way"


@dataclass(frozen=True)
class Tost:
    """TOST of one paired mean change: the estimate, its ``1 - 2 alpha`` interval, the p-value."""

    change: float
    ci: tuple[float, float]
    p: float
    margin: float
    alpha: float

    @property
    def equivalent(self) -> bool:
        return self.p <= self.alpha

    def report(self) -> dict:
        return {
            "change": self.change,
            f"ci{round(100 * (1 - 2 * self.alpha))}": list(self.ci),
            "p_tost": self.p,
            "equivalent": self.equivalent,
        }


def tost(diff, margin: float, alpha: float = 0.05) -> Tost:
    """Paired TOST of the per-unit differences ``diff`` against the margin ``(-margin, margin)``."""
    d = np.asarray(diff, np.float64)
    if margin <= 0:
        raise ValueError(f"the equivalence margin must be positive, got {margin}")
    if len(d) < 2:  # no spread to test against: equivalence cannot be shown (p = 1), never an error
        return Tost(
            float(d.mean()) if len(d) else float("nan"), (float("nan"), float("nan")), 1.0, margin, alpha
        )
    mean = float(d.mean())
    se = float(d.std(ddof=1) / np.sqrt(len(d)))
    df = len(d) - 1
    if se <= 1e-12 * max(1.0, abs(mean)):
        p = 0.0 if abs(mean) < margin else 1.0
        return Tost(mean, (mean, mean), p, margin, alpha)
    p_low = float(stats.t.sf((mean + margin) / se, df))  # H0: mu <= -margin
    p_high = float(stats.t.cdf((mean - margin) / se, df))  # H0: mu >= margin
    half = float(stats.t.ppf(1 - alpha, df)) * se
    return Tost(mean, (mean - half, mean + half), max(p_low, p_high), margin, alpha)


def verdict(effect: bool, tests: list[Tost]) -> str:
    """A direction's word on a metric: ``effect`` when its claim is significant, ``no effect`` when
    every arm's TOST shows equivalence (intersection-union), else ``not shown either way``."""
    if effect:
        return EFFECT
    if tests and all(t.equivalent for t in tests):
        return EQUIVALENT.format(margin=tests[0].margin)
    return UNDECIDED
