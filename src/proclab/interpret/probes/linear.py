"""Linear probes from activations to one ground-truth target, cross-validated over episodes.

A probe is scikit-learn's ridge regression (continuous targets; the penalty picked by efficient
leave-one-out inside each training fold, ``RidgeCV``) or logistic regression (binary targets), on
activations standardised with the training fold's means and deviations. Folds are
``GroupKFold`` with episodes as groups: consecutive steps of one episode are nearly the same
input, so a step-level split would let a probe score by remembering episodes.

Every prediction is made on a held-out episode, and the score is pooled over all of them: ``R^2``
against the overall mean (continuous) or accuracy (binary). Its interval resamples *episodes*
(the independent units) with replacement: per-episode sums (squared errors, counts, sums of the
target and its square; correct predictions) are reweighted, so one bootstrap is a matrix product.
Two scores compared on the same rows (a probe and its control) share the resamples, which gives
the paired interval of their difference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proclab.errors import ProclabError
from proclab.interpret.stats.paired import interval, resamples, weights

KINDS = ("auto", "ridge", "logistic")
ALPHAS = np.logspace(-2, 5, 8)


def probe_kind(y: np.ndarray, kind: str) -> str:
    """``auto``: logistic for a target whose values are all 0 or 1, ridge otherwise."""
    if kind != "auto":
        return kind
    return "logistic" if np.isin(np.unique(y), (0.0, 1.0)).all() else "ridge"


def cross_validated(x: np.ndarray, y: np.ndarray, groups: np.ndarray, kind: str, folds: int) -> np.ndarray:
    """Out-of-fold predictions (ridge: values; logistic: classes) of ``y`` from ``x``, episodes as groups."""
    # lazy: scikit-learn is slow to import, only the fits need it
    from sklearn.linear_model import LogisticRegression, RidgeCV
    from sklearn.model_selection import GroupKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    n_groups = len(np.unique(groups))
    if n_groups < 2:
        raise ProclabError(f"a cross-validated probe needs at least 2 episodes, got {n_groups}")
    pred = np.empty(len(y), np.float64)
    for train, test in GroupKFold(min(folds, n_groups)).split(x, y, groups):
        if kind == "logistic" and len(np.unique(y[train])) < 2:
            pred[test] = y[train][0]  # one class seen: the only sensible prediction
            continue
        model = RidgeCV(alphas=ALPHAS) if kind == "ridge" else LogisticRegression(max_iter=2000)
        fitted = make_pipeline(StandardScaler(), model).fit(x[train], y[train])
        pred[test] = fitted.predict(x[test])
    return pred


def constant_predictions(y: np.ndarray, groups: np.ndarray, kind: str, folds: int) -> np.ndarray:
    """The constant baseline under the same folds: the training fold's mean (ridge) or majority class."""
    return cross_validated(np.zeros((len(y), 1), np.float32), y, groups, kind, folds)


@dataclass(frozen=True)
class EpisodeSums:
    """Per-episode sufficient statistics of a score (so a bootstrap over episodes is a matrix product)."""

    kind: str
    n: np.ndarray
    sse: np.ndarray  # ridge: squared errors; logistic: wrong predictions
    sy: np.ndarray
    syy: np.ndarray

    @classmethod
    def of(cls, y: np.ndarray, pred: np.ndarray, episode: np.ndarray, kind: str) -> EpisodeSums:
        _, inv = np.unique(episode, return_inverse=True)
        err = (y - pred) ** 2 if kind == "ridge" else (np.round(pred) != y).astype(np.float64)

        def per(v):
            return np.bincount(inv, weights=v)

        return cls(kind, per(np.ones_like(y)), per(err), per(y), per(y * y))

    def score(self, w: np.ndarray) -> np.ndarray:
        """Score under episode weights ``w`` (``(E,)`` or ``(reps, E)``): R^2 or accuracy."""
        n, sse = w @ self.n, w @ self.sse
        if self.kind == "logistic":
            return 1.0 - sse / n
        sst = w @ self.syy - (w @ self.sy) ** 2 / n
        return 1.0 - sse / np.maximum(sst, 1e-300)


def scored(sums: dict[str, EpisodeSums], reps: int, seed: int, reference: str = "probe") -> dict:
    """Each score with its episode-bootstrap 95 % interval, and each control's paired difference from
    ``reference`` (the probe's margin over it)."""
    n_episodes = len(next(iter(sums.values())).n)
    w = weights(resamples(n_episodes, reps, seed), n_episodes)
    ones = np.ones(n_episodes)
    boot = {name: s.score(w) for name, s in sums.items()}
    out = {name: {"score": float(s.score(ones)), "ci": interval(boot[name])} for name, s in sums.items()}
    for name in sums:
        if name != reference:
            diff = boot[reference] - boot[name]
            out[name]["probe_margin"] = {
                "value": out[reference]["score"] - out[name]["score"],
                "ci": interval(diff),
                "significant": bool(np.percentile(diff, 2.5) > 0),
            }
    return out


def shuffled_labels(y: np.ndarray, episode: np.ndarray, seed: int) -> np.ndarray:
    """The control task: each episode's label sequence replaced by another episode's, stretched to its
    length (a random permutation of episodes). The labels keep their distribution and their course
    within an episode; only their link to the episode's inputs is cut (Hewitt & Liang 2019)."""
    order = np.argsort(episode, kind="stable")
    ids, first, length = np.unique(episode[order], return_index=True, return_counts=True)
    perm = np.random.default_rng([seed, 7]).permutation(len(ids))
    sorted_y = y[order]
    out = np.empty_like(y)
    for e in range(len(ids)):
        src, n, n2 = perm[e], length[e], length[perm[e]]
        out[order[first[e] : first[e] + n]] = sorted_y[first[src] + (np.arange(n) * n2) // n]
    return out
