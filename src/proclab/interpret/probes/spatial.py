"""Which channels of a convolutional map follow an entity's position.

For each channel, its *centre of mass* on a step is the mean pixel position of its positive part
(``relu``), in the observation's pixels (the map covers the 64 x 64 frame); a channel silent on a
step (no positive activation) has none there and that step is left out for it. A channel
*tracks* an entity when its centre of mass moves with the entity: the score is the mean of two
Pearson correlations, centre x with the entity's pixel x and centre y with its pixel y.

Statistics treat episodes as the units (an entity often stays put for a whole episode, so steps
are far from independent):

* the interval resamples episodes (per-episode sums of the six moments of each correlation, so a
  bootstrap is a matrix product);
* the p-value is a permutation test that gives each episode another episode's course of the
  entity's position (stretched to its length), keeping both series' own structure and cutting
  only their link; two-sided on the score;
* p-values across channels are adjusted (Holm by default, :mod:`proclab.stats.corrections`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proclab.interpret.probes.linear import shuffled_labels
from proclab.stats.bootstrap import interval, resamples, weights
from proclab.stats.corrections import adjust
from proclab.stats.permutation import permutation_p


def centres_of_mass(maps: np.ndarray, frame: int = 64) -> np.ndarray:
    """``(N, C, H, W)`` maps -> ``(N, C, 2)`` centre of mass ``(px, py)`` of each channel's positive part
    in frame pixels (NaN where a channel has no positive activation)."""
    m = np.maximum(maps, 0).astype(np.float64)
    mass = m.sum((2, 3))
    h, w = maps.shape[2:]
    cols = (np.arange(w) + 0.5) * frame / w
    rows = (np.arange(h) + 0.5) * frame / h
    with np.errstate(invalid="ignore", divide="ignore"):
        px = (m.sum(2) @ cols) / mass
        py = (m.sum(3) @ rows) / mass
    return np.stack([px, py], -1)


@dataclass(frozen=True)
class Moments:
    """Per-episode sums ``(E, C)`` of n, a, b, aa, bb, ab for the correlation of ``a`` (a channel's
    centre) with ``b`` (the entity's position) over the steps where both exist."""

    s: np.ndarray  # (6, E, C)

    @classmethod
    def of(cls, a: np.ndarray, b: np.ndarray, inv: np.ndarray, n_episodes: int) -> Moments:
        from scipy.sparse import csr_matrix  # lazy: scipy is slow to import, only this step needs it

        ok = ~np.isnan(a) & ~np.isnan(b)[:, None]
        a0 = np.where(ok, a, 0.0)
        b0 = np.where(ok, b[:, None], 0.0)
        parts = np.concatenate([ok.astype(np.float64), a0, b0, a0 * a0, b0 * b0, a0 * b0], 1)
        rows = csr_matrix((np.ones(len(inv)), (inv, np.arange(len(inv)))), shape=(n_episodes, len(inv)))
        return cls(np.stack(np.split(rows @ parts, 6, axis=1)))  # per-episode sums: one sparse product

    def correlation(self, w: np.ndarray) -> np.ndarray:
        """Correlation per channel under episode weights ``w`` (``(E,)`` -> ``(C,)``; ``(R, E)`` -> ``(R, C)``)."""
        n, a, b, aa, bb, ab = (w @ s for s in self.s)
        with np.errstate(invalid="ignore", divide="ignore"):
            cov = ab - a * b / n
            va, vb = aa - a * a / n, bb - b * b / n
            # a centre that never moves (a channel active on one cell only) has no correlation
            degenerate = (va <= 1e-9 * np.maximum(aa, 1e-300)) | (vb <= 1e-9 * np.maximum(bb, 1e-300))
            return np.where(degenerate, np.nan, cov / np.sqrt(np.abs(va * vb)))


def _score(mx: Moments, my: Moments, w: np.ndarray) -> np.ndarray:
    return 0.5 * (mx.correlation(w) + my.correlation(w))


def track_channels(
    centres: np.ndarray,
    position: np.ndarray,
    episode: np.ndarray,
    *,
    permutations: int = 0,
    bootstrap: int = 1000,
    correction: str = "holm",
    alpha: float = 0.05,
    seed: int = 0,
) -> list[dict]:
    """Per channel (ranked by score, highest first): score, its x and y correlations, episode-bootstrap
    interval, permutation p-value, adjusted p-value and whether it is significant after correction.

    ``permutations=0`` takes enough for the correction to be able to reach ``alpha``: with ``P``
    permutations the smallest p-value is ``1 / (P + 1)``, and Holm multiplies it by the ``C`` channels, so
    ``P = ceil(2 C / alpha)`` (1,280 for 32 channels at 0.05)."""
    if permutations <= 0:
        permutations = needed_permutations(centres.shape[1], alpha)
    ids, inv = np.unique(episode, return_inverse=True)
    n_ep = len(ids)

    def moments(pos: np.ndarray) -> tuple[Moments, Moments]:
        return tuple(Moments.of(centres[:, :, k], pos[:, k], inv, n_ep) for k in (0, 1))

    mx, my = moments(position)
    ones = np.ones(n_ep)
    observed = _score(mx, my, ones)
    rx, ry = mx.correlation(ones), my.correlation(ones)
    boot = _score(mx, my, weights(resamples(n_ep, bootstrap, seed), n_ep))
    null = np.empty((permutations, len(observed)))
    for r in range(permutations):
        permuted = np.stack([shuffled_labels(position[:, k], episode, seed + 1 + r) for k in (0, 1)], 1)
        null[r] = np.abs(np.nan_to_num(_score(*moments(permuted), ones)))
    p = np.where(np.isnan(observed), 1.0, permutation_p(np.abs(observed), null, 1e-12))
    adjusted = adjust(p, correction)
    cis = interval(np.nan_to_num(boot.T))
    rows = [
        {
            "channel": c,
            "score": _num(observed[c]),
            "r_x": _num(rx[c]),
            "r_y": _num(ry[c]),
            "ci": cis[c],
            "p": float(p[c]),
            "p_adjusted": float(adjusted[c]),
            "significant": bool(adjusted[c] <= alpha),
        }
        for c in range(len(observed))
    ]
    return sorted(rows, key=lambda r: -(r["score"] if r["score"] is not None else -np.inf))


def best_channel_margin(
    centres: np.ndarray,
    reference: np.ndarray,
    position: np.ndarray,
    episode: np.ndarray,
    *,
    bootstrap: int = 1000,
    seed: int = 0,
) -> dict:
    """How much better ``centres``' best channel tracks ``position`` than ``reference``'s best (the channels
    of another network on the same rows, e.g. the randomly initialised agent's): each best channel and its
    score, and the paired episode-bootstrap 95 % interval of the difference. In each resample the best
    channel of each network is taken anew (the highest score of that resample), so choosing the maximum
    over many channels, which lifts a random network's best too, is part of the interval. A channel with
    no correlation (its centre never moves) scores 0, as in :func:`track_channels`' intervals."""
    ids, inv = np.unique(episode, return_inverse=True)
    n_ep = len(ids)
    w = weights(resamples(n_ep, bootstrap, seed), n_ep)
    out, boot = {}, {}
    for name, c in (("best", centres), ("reference_best", reference)):
        mx, my = (Moments.of(c[:, :, k], position[:, k], inv, n_ep) for k in (0, 1))
        observed = np.nan_to_num(_score(mx, my, np.ones(n_ep)))
        boot[name] = np.nan_to_num(_score(mx, my, w)).max(1)
        channel = int(np.argmax(observed))
        out[name] = {"channel": channel, "score": float(observed[channel])}
    ci = interval(boot["best"] - boot["reference_best"])
    margin = out["best"]["score"] - out["reference_best"]["score"]
    return out | {"margin": margin, "ci": ci, "above": bool(ci[0] > 0)}


def needed_permutations(channels: int, alpha: float) -> int:
    """Permutations after which ``channels`` Holm-corrected tests can reach ``alpha`` (twice the bare minimum)."""
    return int(np.ceil(2 * channels / alpha))


def _num(v: float) -> float | None:
    return None if np.isnan(v) else float(v)
