"""The regression against a hand-written Newton (IRLS) fit, planted coefficients recovered inside their
bootstrap intervals, and a cross-validated accuracy that beats the base rate only when a feature carries
the outcome."""

import warnings

import numpy as np
import pytest

from proclab.errors import ProclabError
from proclab.interpret.goals.logistic import cross_validated, fit, regression, standardise


def newton_logistic(z: np.ndarray, y: np.ndarray, steps: int = 50) -> np.ndarray:
    """Maximum likelihood by Newton's method (iteratively reweighted least squares), intercept first."""
    x = np.column_stack([np.ones(len(z)), z])
    beta = np.zeros(x.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-x @ beta))
        hessian = x.T @ (x * (p * (1 - p))[:, None])
        beta = beta + np.linalg.solve(hessian, x.T @ (y - p))
    return beta


def planted(n: int, seed: int, coef=(1.5, -1.0, 0.0), intercept: float = 0.5):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, len(coef)))
    y = (rng.random(n) < 1 / (1 + np.exp(-(intercept + z @ np.array(coef))))).astype(int)
    return z, y


def test_the_unpenalised_fit_is_maximum_likelihood():
    z, y = planted(400, 0)
    assert fit(z, y, "none") == pytest.approx(newton_logistic(z, y), abs=1e-4)


def test_a_weak_l1_penalty_tends_to_maximum_likelihood_and_a_strong_one_zeroes_coefficients():
    z, y = planted(400, 1)
    assert fit(z, y, "l1", c=1e6) == pytest.approx(newton_logistic(z, y), abs=2e-2)
    assert np.all(fit(z, y, "l1", c=1e-4)[1:] == 0)


def test_planted_coefficients_lie_inside_their_intervals():
    z, y = planted(1500, 2)
    r = regression(
        z * [2.0, 5.0, 1.0] + 7.0, y, ["a", "b", "c"], penalty="none", reps=200, folds=5, level=0.99
    )
    # per standard deviation of the sample: standardisation undoes the planted scale and shift
    truth = dict(zip("abc", np.array([1.5, -1.0, 0.0]) * z.std(0), strict=True))
    for name, value in truth.items():
        lo, hi = r["coefficients"][name]["interval"]
        assert lo <= value <= hi
    assert r["coefficients"]["b"]["interval"][1] < 0 < r["coefficients"]["a"]["interval"][0]


def test_accuracy_beats_the_base_rate_only_with_an_informative_feature():
    z, y = planted(600, 3, coef=(3.0,), intercept=1.0)
    informative = cross_validated(standardise(z), y, "l1", 1.0, 10, 0)
    assert informative["accuracy"] > informative["base_rate"] + 0.05 and informative["p_mcnemar"] < 1e-3
    noise = np.random.default_rng(4).normal(size=(600, 1))
    useless = cross_validated(standardise(noise), y, "l1", 1.0, 10, 0)
    assert useless["p_mcnemar"] > 0.01 and useless["accuracy"] <= useless["base_rate"] + 0.02


def test_a_regression_of_one_outcome_is_refused_in_one_line():
    with pytest.raises(ProclabError, match="both outcomes"):
        regression(np.ones((50, 1)), np.ones(50), ["a"])


def test_folds_shrink_to_the_rarer_outcome_so_every_fold_holds_both():
    z, y = planted(60, seed=3)
    y[:] = 0
    y[[4, 17, 40]] = 1  # three mazes of the rarer outcome: ten stratified folds would leave seven without one
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = cross_validated(standardise(z), y, "l1", 1.0, folds=10, seed=0)
    assert out["folds"] == 3
    assert cross_validated(standardise(z), planted(60, seed=3)[1], "l1", 1.0, folds=10, seed=0)["folds"] == 10
