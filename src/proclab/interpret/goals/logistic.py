"""Logistic regression of a binary choice on standardised maze properties, with bootstrap intervals of the
coefficients and a cross-validated accuracy judged against the base rate.

Mini et al. z-scored every property over their mazes, fitted scikit-learn's ``liblinear`` solver with an L1
penalty at ``C = 1`` and reported held-out accuracy over random 80/20 splits beside the majority class's
share. ``penalty="l1"`` repeats that fit (liblinear penalises the intercept too); ``penalty="none"`` is the
plain maximum-likelihood fit. A coefficient is the change of the log-odds per standard deviation of its
property. Its interval is the percentile interval of refits on mazes resampled with replacement (the
features keep the full sample's standardisation). Accuracy is that of ``folds``-fold cross-validated
predictions, each maze predicted once by a model that never saw it, with its exact interval; the base rate
is the accuracy of predicting each held-out maze as the majority of its training folds, and the two are
compared maze by maze by the exact McNemar test (a paired binary outcome).
"""

from __future__ import annotations

import warnings

import numpy as np

from proclab.errors import ProclabError
from proclab.stats.bootstrap import bootstrap_replicates, percentile_interval
from proclab.stats.paired import mcnemar
from proclab.stats.proportions import clopper_pearson

PENALTIES = ("l1", "none")


def standardise(x: np.ndarray) -> np.ndarray:
    """Columns as z-scores (population deviation, as ``scipy.stats.zscore``); a constant column becomes 0."""
    x = np.asarray(x, np.float64)
    sd = x.std(0)
    return (x - x.mean(0)) / np.where(sd > 0, sd, 1.0)


def fit(z: np.ndarray, y: np.ndarray, penalty: str = "l1", c: float = 1.0) -> np.ndarray:
    """``[intercept, coefficients...]`` of a logistic regression of ``y`` (0/1) on ``z``."""
    from sklearn.exceptions import ConvergenceWarning  # lazy: scikit-learn is slow to import
    from sklearn.linear_model import LogisticRegression

    if penalty not in PENALTIES:
        raise ProclabError(f"penalty must be one of {', '.join(PENALTIES)}, not {penalty!r}")
    if penalty == "l1":
        model = LogisticRegression(l1_ratio=1.0, C=c, solver="liblinear", random_state=0)
    else:  # no penalty: C infinite
        model = LogisticRegression(C=np.inf, solver="lbfgs", max_iter=5000, tol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", ConvergenceWarning
        )  # a separable resample: its estimate is still used
        model.fit(z, np.asarray(y, int))
    return np.concatenate([model.intercept_, model.coef_[0]])


def predict(params: np.ndarray, z: np.ndarray) -> np.ndarray:
    """0/1 predictions (probability above one half) of a fit's ``[intercept, coefficients...]``."""
    return (params[0] + z @ params[1:] > 0).astype(int)


def bootstrap(z: np.ndarray, y: np.ndarray, penalty: str, c: float, reps: int, seed: int) -> np.ndarray:
    """``(reps, 1 + k)`` refits on mazes resampled with replacement (NaN where a resample holds one class)."""

    def refit(zr: np.ndarray, yr: np.ndarray) -> np.ndarray:
        return fit(zr, yr, penalty, c) if 0 < yr.sum() < len(yr) else np.full(z.shape[1] + 1, np.nan)

    return bootstrap_replicates(refit, (z, y), reps, seed).reshape(reps, z.shape[1] + 1)


def cross_validated(z: np.ndarray, y: np.ndarray, penalty: str, c: float, folds: int, seed: int) -> dict:
    """Accuracy of ``folds``-fold cross-validated predictions against the training folds' majority class; at
    most as many folds as the rarer outcome has mazes (at least 2), so that every fold holds both outcomes."""
    from sklearn.model_selection import StratifiedKFold  # lazy: scikit-learn is slow to import

    n = len(y)
    folds = max(2, min(folds, int(np.bincount(y).min())))
    model_right, base_right = np.zeros(n, bool), np.zeros(n, bool)
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=seed).split(z, y):
        model_right[test] = predict(fit(z[train], y[train], penalty, c), z[test]) == y[test]
        base_right[test] = y[test] == int(y[train].mean() >= 0.5)
    test = mcnemar(base_right, model_right)
    return {
        "accuracy": float(model_right.mean()),
        "ci95": list(clopper_pearson(int(model_right.sum()), n)),
        "base_rate": float(base_right.mean()),
        "base_rate_ci95": list(clopper_pearson(int(base_right.sum()), n)),
        "mazes_only_model_right": test.gained,
        "mazes_only_base_rate_right": test.lost,
        "p_mcnemar": test.p,
        "folds": folds,
    }


def regression(
    x: np.ndarray,
    y: np.ndarray,
    names: list[str],
    *,
    penalty: str = "l1",
    c: float = 1.0,
    reps: int = 500,
    folds: int = 10,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """One regression of ``y`` on the columns ``names`` of ``x``: coefficients with bootstrap intervals at
    ``level``, the cross-validated accuracy and the base rate."""
    y = np.asarray(y, int)
    if len(y) < 2 * folds or y.min() == y.max():
        raise ProclabError(
            f"a regression needs both outcomes and at least {2 * folds} mazes, got {len(y)} mazes "
            f"({int(y.sum())} of one outcome)"
        )
    z = standardise(x)
    params = fit(z, y, penalty, c)
    lo, hi = percentile_interval(bootstrap(z, y, penalty, c, reps, seed), level, axis=0, skip_nan=True)
    rows = ["intercept", *names]
    return {
        "features": names,
        "mazes": len(y),
        "outcome_share": float(y.mean()),
        "penalty": penalty if penalty == "none" else f"{penalty}, C={c}",
        "coefficients": {
            r: {"value": float(params[i]), "interval": [float(lo[i]), float(hi[i])]}
            for i, r in enumerate(rows)
        },
        "interval_level": level,
        "bootstrap": reps,
        **cross_validated(z, y, penalty, c, folds, seed),
    }
