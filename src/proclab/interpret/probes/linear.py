"""Linear probes from activations to one ground-truth target, cross-validated over episodes.

A probe is a ridge regression (continuous targets) or scikit-learn's logistic regression (binary
targets), on activations standardised with the training fold's means and deviations, a held-out
activation first clipped to its unit's range in the training fold (:func:`standardiser`). Without the
clip, a unit that fires in almost no training step (a ReLU unit of a rare kind of maze) has a tiny
deviation, so its value in the held-out episode where it fires becomes an input many deviations out,
and the probe extrapolates: on the maze agent's fc layer one episode of 200 carried
76 % of agent_x's squared error (per-step error 5,600 against the target's variance 15) and turned a
held-out R^2 of 0.79 into -0.62 (docs/steering.md). The clip holds for every probe's inputs, the time
baseline's among them: a held-out episode longer than every training one is read at the longest one's last
step rather than extrapolated along the step index. Folds are
``GroupKFold`` with episodes as groups: consecutive steps of one episode are nearly the same
input, so a step-level split would let a probe score by remembering episodes.

The same holds for choosing the penalty. Leave-one-out over *steps* (``RidgeCV``'s efficient
default) keeps each held-out step's near-duplicates in the fit, so it rewards memorising episodes
and picks penalties too weak for a new episode: the probe overfits and held-out R^2 collapses
(strongly so for a random network's features). The penalty (ridge's alpha, logistic's C) is
therefore picked by an *inner* ``GroupKFold`` over the training fold's episodes
(:func:`select_penalty`), the one with the smallest pooled held-out loss (squared error; log loss),
the stronger one on ties, and the probe refitted with it on the whole training fold.

Every prediction is made on a held-out episode, and the score is pooled over all of them: ``R^2``
against the overall mean (continuous) or accuracy (binary). Its interval resamples *episodes*
(the independent units) with replacement: per-episode sums (squared errors, counts, sums of the
target and its square; correct predictions) are reweighted, so one bootstrap is a matrix product.
Two scores compared on the same rows (a probe and its control) share the resamples, which gives
the paired interval of their difference, and the probe's margin over the strongest of its controls
(the largest control score in each resample) is the headline.

Controls that change the labels or the inputs (:func:`shuffled_labels`, :func:`control_task`,
:func:`time_features`) live here; the random-initialised agent is made in
:mod:`proclab.interpret.probes.probe`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from proclab.errors import ProclabError
from proclab.stats.bootstrap import interval, resamples, weights

KINDS = ("auto", "ridge", "logistic")
ALPHAS = np.logspace(5, -2, 8)  # ridge penalties, strongest first (ties go to the stronger)
CS = np.logspace(-4, 2, 7)  # logistic inverse penalties, strongest first
MIN_EPISODES = 3  # an outer fold's training part needs 2 episodes for the inner choice of penalty


def probe_kind(y: np.ndarray, kind: str) -> str:
    """``auto``: logistic for a target whose values are all 0 or 1, ridge otherwise."""
    if kind != "auto":
        return kind
    return "logistic" if np.isin(np.unique(y), (0.0, 1.0)).all() else "ridge"


def standardiser(x: np.ndarray) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """``x`` standardised with its column means and deviations (a constant column keeps deviation 1, as
    scikit-learn's), and the function that standardises held-out rows alike, each first clipped to ``x``'s
    column ranges: a probe is never asked about a unit beyond the values it was fitted on (module docstring)."""
    x = np.asarray(x, np.float64)
    mu, sd = x.mean(0), x.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    lo, hi = x.min(0), x.max(0)
    return (x - mu) / sd, lambda held_out: (np.clip(np.asarray(held_out, np.float64), lo, hi) - mu) / sd


def ridge_path(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """``(len(alphas), len(x_test))`` predictions of ridge regressions (intercept unpenalised) fitted on
    ``x`` standardised (:func:`standardiser`), one per penalty, from one eigendecomposition of the smaller
    Gram matrix (the features' ``z'z`` or, when there are fewer rows than features, the rows' ``zz'``)."""
    z, held_out = standardiser(x)
    zt = held_out(x_test)
    yc = y - y.mean()
    if z.shape[1] <= z.shape[0]:  # w = V (L + a)^-1 V' z'y
        lam, vecs = np.linalg.eigh(z.T @ z)
        coef, proj = vecs.T @ (z.T @ yc), zt @ vecs
    else:  # the dual: w = z' U (L + a)^-1 U'y
        lam, vecs = np.linalg.eigh(z @ z.T)
        coef, proj = vecs.T @ yc, (zt @ z.T) @ vecs
    return coef / (np.maximum(lam, 0.0) + alphas[:, None]) @ proj.T + y.mean()


def _logistic(x: np.ndarray, y: np.ndarray, c: float):
    from sklearn.linear_model import LogisticRegression  # lazy: scikit-learn is slow to import

    z, held_out = standardiser(x)
    model = LogisticRegression(C=c, max_iter=2000).fit(z, y)
    return lambda xt: model.predict_proba(held_out(xt))[:, 1]


def _losses(x, y, x_test, y_test, kind: str) -> np.ndarray:
    """Held-out loss of every penalty of the grid: summed squared error (ridge) or log loss (logistic)."""
    if kind == "ridge":
        return ((ridge_path(x, y, x_test, ALPHAS) - y_test) ** 2).sum(1)
    if len(np.unique(y)) < 2:
        return np.zeros(len(CS))  # one class seen: every penalty predicts it, the fold cannot choose
    p = np.clip([_logistic(x, y, c)(x_test) for c in CS], 1e-12, 1 - 1e-12)
    return -(y_test * np.log(p) + (1 - y_test) * np.log(1 - p)).sum(1)


def select_penalty(x: np.ndarray, y: np.ndarray, groups: np.ndarray, kind: str, folds: int) -> float:
    """The grid's penalty (ridge: alpha; logistic: C) with the smallest pooled loss on held-out *episodes*
    of an inner ``GroupKFold`` (``min(folds, episodes)`` folds) of ``x, y``."""
    from sklearn.model_selection import GroupKFold  # lazy: scikit-learn is slow to import

    n_groups = len(np.unique(groups))
    loss = np.zeros(len(ALPHAS if kind == "ridge" else CS))
    for train, test in GroupKFold(min(folds, n_groups)).split(x, y, groups):
        loss += _losses(x[train], y[train], x[test], y[test], kind)
    return float((ALPHAS if kind == "ridge" else CS)[np.argmin(loss)])


def check_folds(folds: int, n_groups: int = MIN_EPISODES) -> None:
    """Refuse fold and episode counts a grouped, nested cross-validation cannot run on, in one line."""
    if folds < 2:
        raise ProclabError(f"--folds must be >= 2 (cross-validation holds out episodes), got {folds}")
    if n_groups < MIN_EPISODES:
        raise ProclabError(
            f"a cross-validated probe needs at least {MIN_EPISODES} episodes (the penalty is chosen on held-out "
            f"episodes of each training fold), got {n_groups}"
        )


def cross_validated(x: np.ndarray, y: np.ndarray, groups: np.ndarray, kind: str, folds: int) -> np.ndarray:
    """Out-of-fold predictions (ridge: values; logistic: classes) of ``y`` from ``x``, episodes as groups,
    each fold's penalty chosen by :func:`select_penalty` on its training episodes."""
    from sklearn.model_selection import GroupKFold  # lazy: scikit-learn is slow to import

    n_groups = len(np.unique(groups))
    check_folds(folds, n_groups)
    pred = np.empty(len(y), np.float64)
    for train, test in GroupKFold(min(folds, n_groups)).split(x, y, groups):
        xt, yt = x[train], y[train]
        if kind == "logistic" and len(np.unique(yt)) < 2:
            pred[test] = yt[0]  # one class seen: the only sensible prediction
            continue
        penalty = select_penalty(xt, yt, groups[train], kind, folds)
        if kind == "ridge":
            pred[test] = ridge_path(xt, yt, x[test], np.array([penalty]))[0]
        else:
            pred[test] = _logistic(xt, yt, penalty)(x[test]) > 0.5
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

    def to_dict(self) -> dict:
        """JSON-ready lists, one value per episode (a result keeps them so a paired bootstrap across targets
        can be run afterwards: :meth:`from_dict`)."""
        return {"kind": self.kind, **{k: getattr(self, k).tolist() for k in ("n", "sse", "sy", "syy")}}

    @classmethod
    def from_dict(cls, d: dict) -> EpisodeSums:
        return cls(d["kind"], *(np.asarray(d[k], np.float64) for k in ("n", "sse", "sy", "syy")))

    def score(self, w: np.ndarray) -> np.ndarray:
        """Score under episode weights ``w`` (``(E,)`` or ``(reps, E)``): R^2 or accuracy."""
        n, sse = w @ self.n, w @ self.sse
        if self.kind == "logistic":
            return 1.0 - sse / n
        sst = w @ self.syy - (w @ self.sy) ** 2 / n
        return 1.0 - sse / np.maximum(sst, 1e-300)


def scored(
    sums: dict[str, EpisodeSums], reps: int, seed: int, family: int = 1, reference: str = "probe"
) -> dict:
    """Each score with its episode-bootstrap 95 % interval; each control's paired difference from
    ``reference`` (the probe's margin over it); and ``headline``: the margin over the *strongest* control
    (the highest score; in each resample the highest of that resample, so choosing the maximum is part
    of the interval), its interval at ``1 - 0.05 / family`` (Bonferroni over the ``family`` targets
    reported together) and whether that interval lies above 0."""
    n_episodes = len(next(iter(sums.values())).n)
    w = weights(resamples(n_episodes, reps, seed), n_episodes)
    ones = np.ones(n_episodes)
    boot = {name: s.score(w) for name, s in sums.items()}
    out = {name: {"score": float(s.score(ones)), "ci": interval(boot[name])} for name, s in sums.items()}
    controls = [name for name in sums if name != reference]
    for name in controls:
        diff = boot[reference] - boot[name]
        out[name]["probe_margin"] = {
            "value": out[reference]["score"] - out[name]["score"],
            "ci": interval(diff),
            "significant": bool(np.percentile(diff, 2.5) > 0),
        }
    if controls:
        strongest = max(controls, key=lambda name: out[name]["score"])
        diff = boot[reference] - np.max([boot[name] for name in controls], axis=0)
        level = 1.0 - 0.05 / family
        ci = interval(diff, level)
        out["headline"] = {
            "strongest_control": strongest,
            "margin": out[reference]["score"] - out[strongest]["score"],
            "ci": ci,
            "level": level,
            "significant": bool(ci[0] > 0),
        }
    return out


def shuffled_labels(y: np.ndarray, episode: np.ndarray, seed: int) -> np.ndarray:
    """Each episode's label sequence replaced by another episode's, stretched to its length (a random
    permutation of episodes). The labels keep their distribution and their course within an episode;
    only their link to the episode's inputs is cut, so a probe scores on them by the course alone."""
    order = np.argsort(episode, kind="stable")
    ids, first, length = np.unique(episode[order], return_index=True, return_counts=True)
    perm = np.random.default_rng([seed, 7]).permutation(len(ids))
    sorted_y = y[order]
    out = np.empty_like(y)
    for e in range(len(ids)):
        src, n, n2 = perm[e], length[e], length[perm[e]]
        out[order[first[e] : first[e] + n]] = sorted_y[first[src] + (np.arange(n) * n2) // n]
    return out


def control_task(y: np.ndarray, level: np.ndarray, seed: int) -> np.ndarray:
    """Hewitt & Liang's (2019) control task: one random label per *level* (a value drawn from the
    target's own steps), the same at every step of that level, in every fold. A probe scores on it only by
    recognising levels and remembering their labels: its score is what the probe's capacity alone buys.
    (With every level played once, held-out episodes are new levels and it scores at most ~0.)"""
    ids, inv = np.unique(level, return_inverse=True)
    draws = np.random.default_rng([seed, 11]).integers(0, len(y), len(ids))
    return y[draws][inv]


def time_features(episode: np.ndarray) -> np.ndarray:
    """``(N, 2)``: each row's step index and its square, for rows that are episode after episode in step order
    (as every probe's rows are). A target that grows with time is read out from these alone, so any state that
    carries a clock "encodes" it as well. Only what is known at the step: the episode's progress (step over its
    length) would need the length, known at the end, and where a goal lies at the level's end the distance to
    it is nearly a function of progress, so such a baseline would read the target from the future."""
    starts = np.flatnonzero(np.r_[True, episode[1:] != episode[:-1]])
    lengths = np.diff(np.r_[starts, len(episode)])
    step = (np.arange(len(episode)) - np.repeat(starts, lengths)).astype(np.float64)
    return np.stack([step, step**2], 1)
