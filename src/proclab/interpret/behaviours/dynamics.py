"""IC dynamics of simulated rollouts: cross-correlation X and cross-causation J, in one orientation.

**Orientation** (both, everywhere): ``X[l][i, j]`` and ``J[l][i, j]`` relate IC ``i`` at the
*earlier* step (row) to IC ``j`` at the *later* step ``l`` steps on (column).

* ``X[l][i, j] = mean over member samples and t of s_i(t) * s_j(t + l)`` on IC loadings ``s``,
  normalised by the number of (sample, t) pairs, ``members * (T - l)``. The seed took the
  first N samples instead of the behaviour's members and divided by the IC count.
* ``J[l][i, j] = mean over members of dIC_j(k*) / dIC_i(k* - l)``: the saliency store's
  ``grad/ic_j/ic`` row ``k* - l``, column ``i`` (targets ``ic:j`` at step ``k*``, gradients
  projected onto the IC directions).

For a linear system ``s(t+1) = M s(t) + eps`` with stationary covariance ``Sigma``,
``J[1] = M^T`` and ``X[1] = Sigma M^T = (M Sigma)^T`` (tested).

Per-sample contributions (``per_sample_xcorr``, ``per_sample_jacobians``) are kept so that group
statistics of any grouping, including the permuted ones of the consistency null, are sums.
"""

from __future__ import annotations

import numpy as np

from proclab.errors import ProclabError
from proclab.store import EpisodeStore


def per_sample_xcorr(s: np.ndarray, max_lag: int) -> np.ndarray:
    """``(n, T, k)`` IC loadings -> ``(n, L + 1, k, k)``: per sample and lag, the mean over t of
    ``s(t)^T s(t + l)`` (so a group's ``X`` is the mean of its members' rows)."""
    T = s.shape[1]
    if max_lag >= T:
        raise ProclabError(f"--max-lag {max_lag} needs samples longer than {max_lag} steps; they have {T}")
    return np.stack(
        [np.einsum("nti,ntj->nij", s[:, : T - lag], s[:, lag:]) / (T - lag) for lag in range(max_lag + 1)], 1
    )


def group_mean(per_sample: np.ndarray, labels: np.ndarray, groups: int) -> np.ndarray:
    """Mean of each group's rows: ``(n, ...)`` -> ``(groups, ...)`` (NaN for an empty group)."""
    out = np.full((groups, *per_sample.shape[1:]), np.nan)
    for g in range(groups):
        m = labels == g
        if m.any():
            out[g] = per_sample[m].mean(0)
    return out


EXTREMA_MIN_MEMBERS = 3
"""Fewest members a behaviour needs for its extrema-conditioned cross-correlation."""


def extrema_xcorr(
    s: np.ndarray, max_lag: int, share: float = 0.02, labels: np.ndarray | None = None, groups: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Extrema-conditioned cross-correlation: ``top[l][i, j]`` is the mean of ``s_i(t)`` over the
    pairs where ``s_j(t + l)`` is in IC j's top ``share`` (``bottom``: its bottom ``share``); NaN
    where no pair qualifies. Same orientation as ``X``.

    Without ``labels`` the result is ``(max_lag + 1, k, k)`` over all samples. With ``labels``
    it is ``(groups + 1, max_lag + 1, k, k)``, laid out like ``X``: one row per group over its
    members, then one over all samples. The thresholds are always taken over all samples, so
    "extreme" means the same in every group; a group with fewer than :data:`EXTREMA_MIN_MEMBERS`
    members is NaN (too few to condition on, the seed's rule).
    """
    k = s.shape[2]
    flat = s.reshape(-1, k)
    hi, lo = np.quantile(flat, 1 - share, axis=0), np.quantile(flat, share, axis=0)
    if labels is None:
        return _conditioned(s, max_lag, hi, lo)
    empty = np.full((max_lag + 1, k, k), np.nan)
    rows = [
        _conditioned(s[labels == g], max_lag, hi, lo)
        if np.sum(labels == g) >= EXTREMA_MIN_MEMBERS
        else (empty, empty)
        for g in range(groups)
    ] + [_conditioned(s, max_lag, hi, lo)]
    return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])


def _conditioned(
    s: np.ndarray, max_lag: int, hi: np.ndarray, lo: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    T = s.shape[1]
    out = []
    for mask in (s >= hi, s <= lo):
        rows = []
        for lag in range(max_lag + 1):
            m = mask[:, lag:].astype(np.float64)
            total = np.einsum("nti,ntj->ij", s[:, : T - lag], m)
            count = m.sum((0, 1))
            with np.errstate(invalid="ignore", divide="ignore"):
                rows.append(np.where(count > 0, total / count, np.nan))
        out.append(np.stack(rows))
    return out[0], out[1]


def seriation(matrix: np.ndarray) -> np.ndarray:
    """Leaf order of a Ward dendrogram of the rows of ``matrix`` (puts similar ICs side by side)."""
    from scipy.cluster.hierarchy import leaves_list, linkage

    if len(matrix) < 2:
        return np.arange(len(matrix))
    return leaves_list(linkage(np.nan_to_num(matrix), "ward"))


def cosine(directions: np.ndarray) -> np.ndarray:
    """Cosine similarity of direction vectors (rows)."""
    d = directions / np.linalg.norm(directions, axis=1, keepdims=True).clip(1e-12)
    return d @ d.T


def per_sample_jacobians(store: EpisodeStore, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """From a saliency store with targets ``ic:0`` .. ``ic:k-1``: per episode the Jacobians
    ``(E, k* + 1, k, k)`` in the orientation above, with each episode's sample id and env-grads flag,
    and the target step ``k*``."""
    names = [f"grad/ic_{j}/ic" for j in range(k)]
    missing = [n for n in names if n not in store.step_fields]
    if missing:
        raise ProclabError(
            f"saliency store {str(store.path)!r} lacks {missing[0]}; cross-causation needs a "
            f"saliency run with --target ic:0-{k - 1} and a basis"
        )
    steps = store.episodes["target_step"]
    if len(set(steps.tolist())) != 1:
        raise ProclabError(
            f"saliency store {str(store.path)!r} mixes target steps {sorted(set(steps.tolist()))}"
        )
    step = int(steps[0])
    n, T = store.num_episodes, int(store.episodes["length"][0])
    # grads[e, j, t, i] = dIC_j(k*) / dIC_i(t)
    grads = np.stack([store.read_steps(name).reshape(n, T, -1) for name in names], 1)
    lags = [grads[:, :, step - lag, :k].transpose(0, 2, 1) for lag in range(step + 1)]  # (E, i, j)
    return (
        np.stack(lags, 1),
        store.episodes["sample"].astype(np.int64),
        store.episodes["env_grads"].astype(bool),
        step,
    )
