"""TOST against a slow reference (Student's t integrated by hand) and its error rates at the margin; shares
of directions as the sweep reports them; per-claim p-values against Holm written out."""

import math

import numpy as np
import pytest

from proclab.interpret.stats.claims import changes, claim_p, claims
from proclab.interpret.stats.equivalence import EFFECT, UNDECIDED, tost, verdict
from proclab.interpret.stats.proportions import compare_shares, share
from proclab.stats.proportions import share_difference, wilson


def t_cdf(x: float, df: int) -> float:
    """Student's t CDF by Simpson's rule on its density, written out (no scipy)."""
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    dens = lambda u: c * (1 + u * u / df) ** (-(df + 1) / 2)  # noqa: E731
    a, n = abs(x), 4000
    h = a / n
    area = dens(0) + dens(a) + sum((4 if i % 2 else 2) * dens(i * h) for i in range(1, n))
    half = area * h / 3
    return 0.5 + half if x >= 0 else 0.5 - half


def slow_tost(d: list[float], margin: float, alpha: float) -> tuple[float, float, float]:
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    se = sd / math.sqrt(n)
    p_low = 1 - t_cdf((mean + margin) / se, n - 1)
    p_high = t_cdf((mean - margin) / se, n - 1)
    lo, hi = 0.0, 50.0  # the (1 - alpha) quantile by bisection
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, n - 1) < 1 - alpha else (lo, mid)
    return max(p_low, p_high), mean - lo * se, mean + lo * se


@pytest.mark.parametrize("seed", range(6))
def test_tost_matches_a_slow_reference(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    d = rng.choice([-10.0, 0.0, 10.0], size=n, p=[0.1, 0.8, 0.1]) + rng.normal(0, 0.3, n) * (seed % 2)
    margin, alpha = float(rng.choice([0.5, 1.0, 3.0])), float(rng.choice([0.05, 0.1]))
    t = tost(d, margin, alpha)
    p, lo, hi = slow_tost(list(d), margin, alpha)
    assert t.p == pytest.approx(p, abs=1e-6)
    assert t.ci == pytest.approx((lo, hi), abs=1e-6)
    assert t.equivalent == (lo > -margin and hi < margin)  # TOST = the 1 - 2 alpha interval inside


def test_tost_holds_its_level_at_the_margin_and_has_power_inside():
    """At a true change exactly on the margin equivalence is shown at most alpha of the time (binomial
    noise, one-sided 99 %), and close to alpha where the margin is wide against the standard error (the
    far one-sided test then always rejects); at a true change of zero with enough levels almost always."""
    rng = np.random.default_rng(0)
    reps, alpha = 2000, 0.05
    at_margin = np.mean([tost(rng.normal(0.5, 0.5, 40), 0.5, alpha).equivalent for _ in range(reps)])
    assert at_margin <= alpha + 2.33 * math.sqrt(alpha * (1 - alpha) / reps)
    assert at_margin > 0.02  # and not far below it: the test is not trivially conservative
    inside = np.mean([tost(rng.normal(0.0, 2.0, 400), 0.5, alpha).equivalent for _ in range(200)])
    assert inside > 0.9


def test_tost_with_no_spread_and_the_verdicts():
    assert tost(np.zeros(10), 0.5).p == 0 and tost(np.full(10, 0.7), 0.5).p == 1
    same, wide = tost(np.zeros(10), 0.5), tost(np.array([-10.0, 10.0] * 3), 0.5)
    assert verdict(True, [same]) == EFFECT
    assert verdict(False, [same, same]).startswith("no effect (equivalent within ±0.5)")
    assert verdict(False, [same, wide]) == UNDECIDED and verdict(False, []) == UNDECIDED
    with pytest.raises(ValueError):
        tost(np.zeros(5), 0.0)
    one = tost(np.zeros(1), 0.5)  # a single paired level (a one-state --levels-from file) shows nothing
    assert one.p == 1 and verdict(False, [one]) == UNDECIDED


def test_compare_shares_reports_the_difference_and_none_without_directions():
    d = compare_shares(5, 16, 10, 64)
    got = share_difference(5, 16, 10, 64)
    assert d == {"difference": got.difference, "ci95": list(got.ci), "p_fisher": got.p}
    assert compare_shares(0, 0, 3, 10) == {"difference": None, "ci95": None, "p_fisher": None}
    assert share(3, 10) == {"count": 3, "of": 10, "share": 0.3, "ci95": list(wilson(3, 10))}
    assert share(0, 0)["share"] is None


def test_claims_are_holm_within_then_across_directions():
    rng = np.random.default_rng(1)
    tests = {
        m: {(a, x): float(rng.uniform(0, 0.2)) for a in "ab" for x in ("return", "tv")} for m in range(5)
    }
    tests[2] = {k: 1e-4 for k in tests[2]}
    out = claims(tests, "holm", 0.05)
    raw = {m: min(1.0, 4 * min(tests[m].values())) for m in tests}
    order = sorted(raw, key=raw.get)
    running = 0.0
    for i, m in enumerate(order):  # Holm across directions, written out
        running = max(running, min(1.0, (5 - i) * raw[m]))
        assert out[m]["p"] == pytest.approx(raw[m]) and out[m]["p_adjusted"] == pytest.approx(running)
    assert out[2]["significant"] and len(out[2]["carried_by"]) == 4
    assert claim_p([0.01, 0.5, 0.9]) == pytest.approx(0.03)


def test_a_claim_about_one_metric_is_bonferroni_over_that_metrics_arms():
    rng = np.random.default_rng(3)
    tests = {}
    for m in range(40):
        arms = ["mean", "p05", "p95"][: 1 + m % 3]
        tests[m] = {(a, metric): float(rng.uniform(0, 0.08)) for a in arms for metric in ("return", "length")}
    tests[40] = {("mean", "length"): 0.001}  # no test of return: never changes it
    got = changes(tests, "return", 0.05)
    for m, t in tests.items():
        p = [v for (arm, metric), v in t.items() if metric == "return"]
        assert got[m] == (len(p) > 0 and min(p) * len(p) <= 0.05), m
    assert 0 < sum(got.values()) < 40  # the draw puts directions on both sides
