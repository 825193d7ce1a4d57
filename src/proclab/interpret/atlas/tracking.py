"""What a direction tracks: its correlation with per-step quantities, at lags, with CIs over episodes.

The quantities (:func:`step_quantities`), per recorded step ``t`` of an episode of ``T`` steps:
the value ``V(obs_t)``, the raw reward, each action taken (one indicator per action that occurs),
episode progress ``t / (T - 1)``, the last step, and the events Procgen reports at an episode's
end: level completed, and ended without completion (the last step of an episode that did not
complete its level: died or timed out); and, in a store recorded with ground truth, the game's
features defined at every step (``gt agent_x``, ``gt goal_y``, ...; :func:`ground_truth_columns`) and,
per followed kind, its proximity (``gt saw proximity``: :func:`proximity_columns`).

**Lead/lag.** At lag ``l`` the coordinate at step ``t`` is paired with the quantity at step
``t + l`` of the same episode (pairs never cross episodes): ``l > 0`` asks whether the direction
*leads* the quantity ("fires 3 steps before a jump" is a peak at ``l = 3`` with the jump action),
``l < 0`` whether it follows it. Lags run over ``-8 .. 8``.

**CIs over episodes.** Steps of one episode are not independent, so intervals resample whole
episodes (a cluster bootstrap): ``r`` is the Pearson correlation of all pairs, recomputed on each
resample of episodes drawn with replacement, and the interval is the 2.5-97.5 percentile of those
(``reps`` resamples, one draw shared by every direction, quantity and lag). Everything is computed
from per-episode sums (pairs, sums, sums of squares and of products), so a resample is one
weighted sum (a matrix product with the draw counts) instead of a pass over the steps.

**Tests.** Every quantity is tested at lag 0 (``r = 0``), with a p-value from the bootstrap's
normal approximation (``z = r / se``, ``se`` the resamples' standard deviation); the card calls a
quantity *tracked* when its p-value survives Holm's correction over the direction's quantities.

**Peak.** Per (direction, quantity), the lag ``l != 0`` with the largest ``|r|``. It is called a lead
(``l > 0``) or a lag only when the shifted correlation is reliably *stronger* than the simultaneous
one: the gain ``|r_l| - |r_0|`` (same resamples) has a one-sided p-value below ``alpha`` divided by
every (quantity, lag) that could have been picked (Bonferroni), and ``r_l``'s interval excludes 0.
With fewer than ``MIN_EPISODES`` episodes nothing is claimed. Episode progress never leads or lags: shifting a ramp only adds a constant, and the pairs near an
episode's end make that look like a correlation.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from proclab.stats.bootstrap import percentile_interval, resamples, weights

LAGS = 8
"""Lags ``-LAGS .. LAGS`` (steps)."""
ALPHA = 0.05
"""Error rate of the tracked and lead/lag claims (see the module docstring)."""
MIN_EPISODES = 20
"""Below this many episodes a resample of episodes says little about the spread, so no quantity is called
tracked, led or lagged (the correlations and their intervals are still reported)."""
NO_LAGS = ("progress",)
"""Quantities never called led or lagged (a ramp, see the module docstring)."""
MEMORY = 256 * 2**20
"""Bytes of per-episode product sums held at once (directions are processed in chunks under it)."""


@dataclass(frozen=True)
class Steps:
    """Per-step quantities of the analysed episodes: ``values[i, q]`` is quantity ``names[q]`` at row
    ``i`` of the concatenated episodes, whose lengths are ``lengths``."""

    names: list[str]
    values: np.ndarray  # (N, Q) float64
    lengths: np.ndarray  # (E,) int64


def step_quantities(recorded, action_names: list[str]) -> Steps:
    """The quantities of the module docstring for the episodes ``recorded`` (a
    :class:`~proclab.interpret.atlas.episodes.StoreEpisodes` or ``RolloutEpisodes``; actions that never
    occur and events that never happen are left out: a constant has no correlation)."""
    lengths = recorded.lengths
    n = int(lengths.sum())
    ends = np.cumsum(lengths)
    step = np.arange(n) - np.repeat(ends - lengths, lengths)
    last = step == np.repeat(lengths - 1, lengths)
    cols: dict[str, np.ndarray] = {}
    for name in ("value", "reward"):
        values = recorded.steps(name)
        if values is not None:
            cols[name] = values.astype(np.float64)
    cols["progress"] = step / np.maximum(np.repeat(lengths - 1, lengths), 1)
    cols["last step"] = last.astype(np.float64)
    complete = recorded.level_complete()
    if complete is not None:
        complete = np.repeat(complete, lengths)
        cols["level completed"] = (last & complete).astype(np.float64)
        cols["ended without completion"] = (last & ~complete).astype(np.float64)
    action = recorded.steps("action")
    if action is not None:
        for a in np.unique(action):
            name = action_names[a] if a < len(action_names) else str(a)
            cols[f"action {name}"] = (action == a).astype(np.float64)
    cols |= ground_truth_columns(recorded)
    kept = {k: v for k, v in cols.items() if np.ptp(v) > 0}
    return Steps(list(kept), np.stack(list(kept.values()), 1), lengths)


def ground_truth_columns(recorded) -> dict[str, np.ndarray]:
    """The ground-truth features of the episodes (``proclab record`` stores them by default, a rollout holds
    them with ``truth=True``) that are defined at every step (agent position and velocity; goal position
    where it never disappears), as quantities a direction may track, named ``gt <feature>``; none without
    ground truth. Features with a missing step (the nearest saw when none is on screen) are left to
    ``analyze probe``, which handles them."""
    found = recorded.features()
    if found is None:
        return {}
    names, values = found
    values = values.astype(np.float64)
    cols = {f"gt {n}": values[:, i] for i, n in enumerate(names) if np.isfinite(values[:, i]).all()}
    return cols | proximity_columns(values, list(names))


def proximity_columns(values: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
    """Per kind with offset features ``<kind>_dx``, ``<kind>_dy`` (``values``: ``(N, F)`` features named
    ``names``): ``gt <kind> proximity`` = ``1 / (1 + d)``, ``d`` the Euclidean distance from the agent's centre
    to the nearest one, and 0 where the level holds none (the offsets are NaN: nothing of the kind is near).
    Defined at every step, unlike the offsets, so a direction can be asked whether it tracks how near a saw
    or a crate is (what ``--swaps saw:crate`` of the sweep picks directions by); ``1 / (1 + d)`` rather than
    ``d`` because what is far away is equally irrelevant at any distance, and absent kinds are farthest."""
    out = {}
    for i, name in enumerate(names):
        kind = name.removesuffix("_dx")
        if not name.endswith("_dx") or f"{kind}_dy" not in names:
            continue
        dx, dy = values[:, i], values[:, names.index(f"{kind}_dy")]
        d = np.hypot(dx, dy)
        out[f"gt {kind} proximity"] = np.where(
            np.isfinite(d), 1.0 / (1.0 + np.where(np.isfinite(d), d, 0.0)), 0.0
        )
    return out


@dataclass
class _Sums:
    """Per episode and lag: pairs ``n`` (E, L), sums of x, x^2 (E, L, k), of y, y^2 (E, L, Q), and of
    x y (E, L, k, Q)."""

    n: np.ndarray
    sx: np.ndarray
    sxx: np.ndarray
    sy: np.ndarray
    syy: np.ndarray
    sxy: np.ndarray


def lag_list(lags: int = LAGS) -> np.ndarray:
    return np.arange(-lags, lags + 1)


def episode_sums(x: np.ndarray, y: np.ndarray, lengths: np.ndarray, lags: np.ndarray) -> _Sums:
    """The per-episode sums of every (x column, y column, lag) pair (x at ``t``, y at ``t + lag``)."""
    E, L, k, Q = len(lengths), len(lags), x.shape[1], y.shape[1]
    out = _Sums(
        np.zeros((E, L)),
        np.zeros((E, L, k)),
        np.zeros((E, L, k)),
        np.zeros((E, L, Q)),
        np.zeros((E, L, Q)),
        np.zeros((E, L, k, Q)),
    )
    start = 0
    for e, T in enumerate(lengths):
        xe, ye = x[start : start + T], y[start : start + T]
        start += T
        shifted = np.zeros((T, L, Q))
        mask = np.zeros((T, L))
        for j, lag in enumerate(lags):
            lo, hi = max(0, -lag), min(T, T - lag)
            if hi > lo:
                shifted[lo:hi, j] = ye[lo + lag : hi + lag]
                mask[lo:hi, j] = 1.0
        out.n[e] = mask.sum(0)
        out.sx[e], out.sxx[e] = mask.T @ xe, mask.T @ (xe * xe)
        out.sy[e], out.syy[e] = shifted.sum(0), (shifted * shifted).sum(0)
        out.sxy[e] = (xe.T @ shifted.reshape(T, L * Q)).reshape(k, L, Q).transpose(1, 0, 2)
    return out


def correlations(s: _Sums, w: np.ndarray) -> np.ndarray:
    """Pearson ``r`` of every (lag, x column, y column) from the sums weighted by episode counts ``w``
    (``(E,)`` or ``(reps, E)``): ``(..., L, k, Q)``; NaN where a side does not vary."""

    def total(a: np.ndarray) -> np.ndarray:  # one matrix product per sum
        return (w @ a.reshape(len(a), -1)).reshape(*w.shape[:-1], *a.shape[1:])

    n, sx, sxx, sy, syy, sxy = (total(a) for a in (s.n, s.sx, s.sxx, s.sy, s.syy, s.sxy))
    n = n[..., None]  # (..., L, 1): broadcasts over the columns of x or y
    cov = n[..., None] * sxy - sx[..., :, None] * sy[..., None, :]
    var = (n * sxx - sx * sx)[..., :, None] * (n * syy - sy * sy)[..., None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(var > 0, cov / np.sqrt(np.where(var > 0, var, 1.0)), np.nan)


def tracking(
    x: np.ndarray, steps: Steps, lags: int = LAGS, reps: int = 1000, seed: int = 0, progress=None
) -> dict[str, np.ndarray]:
    """For coordinates ``x`` (``(N, k)``, rows as in ``steps``): ``r`` ``(k, Q, L)``, its interval ``ci``
    ``(k, Q, L, 2)``, and per (direction, quantity) the ``peak`` lag (``l != 0``, ``(k, Q)``), the interval
    ``gain`` ``(k, Q, 2)`` of ``|r_peak| - |r_0|``. ``progress(done, total)`` as chunks finish."""
    lag_values = lag_list(lags)
    E, L, k, Q = len(steps.lengths), len(lag_values), x.shape[1], len(steps.names)
    y = steps.values - steps.values.mean(0)
    w = weights(resamples(E, reps, seed), E)
    zero = int(np.flatnonzero(lag_values == 0)[0])
    out = {
        "lags": lag_values,
        "episodes": E,
        "r": np.empty((k, Q, L)),
        "ci": np.empty((k, Q, L, 2)),
        "peak": np.empty((k, Q), np.int64),
        "gain": np.empty((k, Q, 2)),
        "p0": np.empty((k, Q)),
        "p_gain": np.empty((k, Q)),
    }
    chunk = max(1, int(MEMORY // (max(E, reps) * L * Q * 8 * 3)))
    for lo in range(0, k, chunk):
        sl = slice(lo, min(k, lo + chunk))
        xc = np.asarray(x[:, sl], np.float64)
        sums = episode_sums(xc - xc.mean(0), y, steps.lengths, lag_values)
        r = correlations(sums, np.ones(E)).transpose(1, 2, 0)  # (kc, Q, L)
        boot = correlations(sums, w).transpose(0, 2, 3, 1)  # (reps, kc, Q, L)
        out["r"][sl], out["ci"][sl] = r, np.moveaxis(percentile_interval(boot, axis=0, skip_nan=True), 0, -1)
        off = np.abs(np.where(np.isnan(r), -1.0, r))
        off[..., zero] = -np.inf
        peak = off.argmax(-1)
        out["peak"][sl] = lag_values[peak]
        at_peak = np.take_along_axis(boot, np.broadcast_to(peak[None, ..., None], (*boot.shape[:-1], 1)), -1)
        gain = np.abs(at_peak[..., 0]) - np.abs(boot[..., zero])
        out["gain"][sl] = np.moveaxis(percentile_interval(gain, axis=0, skip_nan=True), 0, -1)
        estimate = np.abs(np.take_along_axis(r, peak[..., None], -1)[..., 0]) - np.abs(r[..., zero])
        out["p0"][sl] = normal_p(r[..., zero], _sd(boot[..., zero]), two_sided=True)
        out["p_gain"][sl] = normal_p(estimate, _sd(gain), two_sided=False)
        if progress is not None:
            progress(sl.stop, k)
    return out


def _sd(boot: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanstd(boot, axis=0)


def normal_p(estimate: np.ndarray, se: np.ndarray, two_sided: bool) -> np.ndarray:
    """p-values of ``estimate / se`` under a standard normal (two-sided, or one-sided for "> 0"); 1 where
    either is undefined, 0 for a nonzero estimate with a zero spread."""
    estimate, se = np.asarray(estimate, np.float64), np.asarray(se, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, estimate / np.where(se > 0, se, 1.0), np.sign(estimate) * np.inf)
    z = np.where(estimate == 0, 0.0, z)
    tail = np.vectorize(lambda v: 0.5 * math.erfc(v / math.sqrt(2.0)), otypes=[float])
    p = 2.0 * tail(np.abs(z)) if two_sided else tail(z)
    return np.where(np.isfinite(estimate) & np.isfinite(se), np.minimum(p, 1.0), 1.0)
