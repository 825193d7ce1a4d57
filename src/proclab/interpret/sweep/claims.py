"""The sweep's claims: per direction, "it matters" or "it does not", each tested as a whole, and the
share of directions that matter beside the share of random directions that do.

**Effect.** A direction's claim is tested over all of its on-data (arm, metric) tests at once
(:mod:`proclab.interpret.stats.claims`: Holm within the direction, then Holm or Benjamini-Hochberg
over the directions as the claim's family). The metrics are return, episode length and the TV
distance of the actions, plus level completion unless it is a function of return on every played
episode (CoinRun's only reward is the level's end: the two are then one test, counted once). An
edit held off the recorded data describes states the agent never visits and is left out of the
claim, as the atlas leaves it out of a direction's role.

**No effect.** Return's TOST with the margin ``--equivalence-margin`` on every on-data arm
(:mod:`proclab.interpret.stats.equivalence`, an intersection-union test): a direction without a
significant claim is said to have no effect only where that was shown, else "not shown either way".

**Random directions** (``--random-directions N``, :mod:`proclab.interpret.bases.random_directions`) form
their own family, so they neither dilute nor borrow the basis's correction. The shares that
*matter* are compared at the claim's own level (``significant_alone``: within-direction corrected
at ``alpha``, not across directions), since the across-direction correction is harsher for the
larger family and would make random directions look inert for their number alone; the shares come
with Wilson intervals and their difference with Newcombe's interval and Fisher's exact test
(:mod:`proclab.interpret.stats.proportions`).

**Per metric** (``changes``): the same shares for "editing it changes return" (and each other metric)
alone. With many episodes nearly every edit shifts the actions' distribution detectably, so the
shares that "matter" saturate (every direction, basis or random); whether an edit changes how well
the agent plays is the question that still separates directions.
"""

from __future__ import annotations

import numpy as np

from proclab.interpret.interventions.batched_play import Outcomes
from proclab.interpret.stats.claims import changes, claims
from proclab.interpret.stats.equivalence import tost, verdict
from proclab.interpret.stats.proportions import compare_shares, share
from proclab.interpret.sweep.stats import TV


def claim_metrics(out: Outcomes) -> tuple[str, ...]:
    """The metrics a claim tests: completion only where it is not a function of return."""
    ret, done = out.ret.ravel(), out.complete.ravel()
    same = all(len(np.unique(done[ret == r])) == 1 for r in np.unique(ret))
    return ("return", "length", TV) if same else ("return", "level_complete", "length", TV)


def sweep_claims(
    out: Outcomes,
    direction_of: np.ndarray,
    arm_of: list[str],
    reports: list[dict],
    random: set[int],
    *,
    correction: str,
    alpha: float,
    margin: float,
) -> dict:
    """The claims of every swept direction (``reports[v - 1]`` is variant ``v``'s, with its ``edit``),
    split into the basis's and the random directions' families, and the shares that matter."""
    metrics = claim_metrics(out)
    tests: dict[int, dict[tuple[str, str], float]] = {}
    equivalence: dict[int, dict] = {}
    excluded: dict[int, list[str]] = {}
    for v in range(1, len(arm_of)):
        m, arm, rep = int(direction_of[v]), arm_of[v], reports[v - 1]
        tests.setdefault(m, {})
        equivalence.setdefault(m, {})
        excluded.setdefault(m, [])
        if rep["edit"]["off_data"]:
            excluded[m].append(arm)
            continue
        for metric in metrics:
            tests[m][arm, metric] = rep[metric]["p"]
        equivalence[m][arm] = tost(out.ret[v] - out.ret[0], margin, alpha)
    groups = {"basis": [m for m in tests if m not in random], "random": [m for m in tests if m in random]}
    result = {
        "metrics": list(metrics),
        "margin": margin,
        "rule": f"Holm over a direction's on-data arms x {', '.join(metrics)}, then {correction} over the "
        f"directions of the family at alpha {alpha}; no effect: return's TOST within ±{margin:g} on every "
        "on-data arm",
    }
    for name, members in groups.items():
        tested = claims({m: tests[m] for m in members if tests[m]}, correction, alpha)
        rows = []
        for m in members:
            c = tested.get(m, {"tests": 0, "p": None, "p_adjusted": None, "significant": False})
            c = {"significant_alone": False, "carried_by": [], **c}
            tosts = list(equivalence[m].values())
            rows.append(
                {
                    "direction": m,
                    **c,
                    "off_data_arms": excluded[m],
                    "return_tost": {arm: t.report() for arm, t in equivalence[m].items()},
                    "verdict": verdict(c["significant"], tosts),
                }
            )
        result[name] = rows
    result["matter"] = _shares(
        [r["significant_alone"] for r in result["basis"]],
        [r["significant_alone"] for r in result["random"]],
        "claim significant at alpha within its direction (not across)",
    )
    result["changes"] = {}
    for metric in metrics:
        basis, rand = (changes({m: tests[m] for m in groups[g]}, metric, alpha) for g in ("basis", "random"))
        result["changes"][metric] = _shares(
            list(basis.values()),
            list(rand.values()),
            f"Holm over the direction's on-data arms' tests of {metric}, at alpha within the direction",
        )
    return result


def tests_of(
    results: list[dict], metrics: list[str], random: bool = False
) -> dict[int, dict[tuple[str, str], float]]:
    """Per direction of a written sweep's ``results`` (the basis's, or the random ones'), its on-data
    tests' p-values per (arm, metric) of ``metrics``: what the claims were computed from, read back."""
    tests: dict[int, dict[tuple[str, str], float]] = {}
    for r in results:
        if r["random"] != random:
            continue
        t = tests.setdefault(r["direction"], {})
        if not r["edit"]["off_data"]:
            t.update({(r["arm"], m): r[m]["p"] for m in metrics})
    return tests


def _shares(basis: list[bool], random: list[bool], rule: str) -> dict:
    """The share of basis directions and of random ones for which a claim holds, with their difference."""
    a, n, b, m = sum(basis), len(basis), sum(random), len(random)
    out = {"basis": share(a, n), "rule": rule}
    if m:
        out["random"] = share(b, m)
        out["basis_minus_random"] = compare_shares(a, n, b, m)
    return out
