"""Where edits land: how far the states an edited agent passes through lie from the states it visits.

An arm places one coordinate inside its recorded range, yet a coordinate at its 95th percentile for a
whole episode, with the other coordinates going wherever the edited agent takes them, can put the
*whole* state where the agent never goes. So the sweep keeps a sample of the states each variant's
edits produce (:class:`Landing`: a reservoir of at most ``--landing`` states per variant, drawn
uniformly from all its steps) and measures, in the full state space z-scored by the recorded states'
per-unit spread, each one's distance to its nearest recorded state
(:func:`proclab.interpret.stats.clustering.nearest_distance`). The reference is the baseline's own
states: the unedited agent on the same held-out levels, real states that are not among the recorded
ones. Per variant: the median distance, its ratio to the baseline's, and the share of states farther
than the baseline's 99th percentile (``beyond_real_p99``; about 1 % for an edit that stays where real
states lie).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from torch import Tensor

from proclab.interpret.stats.clustering import nearest_distance

PER_CALL = 4
"""Rows of one forward pass offered to the reservoirs (a sample, so a long sweep stays cheap)."""


def _key(dim: int, value: float) -> tuple[int, float]:
    """A reservoir's key: the planned coordinate and value (inf for a value drawn at every step; 0 for the
    baseline and swaps, whose planned codes are negative)."""
    return (int(dim), 0.0 if dim < 0 else (np.inf if np.isnan(value) else float(value)))


class Reservoirs:
    """Per (planned coordinate, planned value), a uniform sample of at most ``cap`` of the states offered
    (``kept``) and how many were offered (``seen``). A sweep played in parts keeps one per part and
    :meth:`merged` draws the whole sweep's sample from them."""

    def __init__(self, cap: int, rng: np.random.Generator):
        self.cap, self.rng = cap, rng
        self.kept: dict[tuple[int, float], list[np.ndarray]] = {}
        self.seen: dict[tuple[int, float], int] = {}

    def offer(self, key: tuple[int, float], state: Tensor) -> None:
        """Reservoir sampling (Vitter's algorithm R): the ``n``-th state offered is kept with chance
        ``cap / n``, replacing a uniformly chosen kept one."""
        seen = self.seen.get(key, 0)
        self.seen[key] = seen + 1
        kept = self.kept.setdefault(key, [])
        if len(kept) < self.cap:
            kept.append(state.detach().double().cpu().numpy())
        elif (j := int(self.rng.integers(0, seen + 1))) < self.cap:
            kept[j] = state.detach().double().cpu().numpy()

    def states(self, dim: int, values: np.ndarray) -> np.ndarray:
        """The kept states of the variant holding ``dim`` at ``values`` (one per level), ``(n, D)``."""
        keys = {_key(dim, float(np.float32(v))) for v in np.ravel(values)}
        rows = [s for k in keys for s in self.kept.get(k, [])]
        return np.stack(rows) if rows else np.zeros((0, 0))

    def arrays(self) -> dict[str, np.ndarray]:
        """The reservoirs as flat arrays (for an ``.npz``): keys, offered counts, and the kept states with
        the index of their key."""
        keys = list(self.kept)
        states = [s for k in keys for s in self.kept[k]]
        return {
            "landing_dims": np.array([k[0] for k in keys], np.int64),
            "landing_values": np.array([k[1] for k in keys], np.float64),
            "landing_seen": np.array([self.seen[k] for k in keys], np.int64),
            "landing_owner": np.array([i for i, k in enumerate(keys) for _ in self.kept[k]], np.int64),
            "landing_states": np.stack(states) if states else np.zeros((0, 0)),
        }

    @classmethod
    def from_arrays(cls, arrays, cap: int, rng: np.random.Generator) -> Reservoirs:
        out = cls(cap, rng)
        for i, (dim, value, seen) in enumerate(
            zip(arrays["landing_dims"], arrays["landing_values"], arrays["landing_seen"], strict=True)
        ):
            key = (int(dim), float(value))
            out.seen[key] = int(seen)
            out.kept[key] = list(arrays["landing_states"][arrays["landing_owner"] == i])
        return out

    @classmethod
    def merged(cls, parts: list[Reservoirs], cap: int, rng: np.random.Generator) -> Reservoirs:
        """One sample of at most ``cap`` states per key from the parts' samples, distributed as a uniform
        sample of every state the parts were offered: how many come from each part is drawn as in such a
        sample (multivariate hypergeometric on the offered counts; never more than a part kept, as it kept
        ``min(cap, seen)``), and those are drawn uniformly from the part's own uniform sample."""
        out = cls(cap, rng)
        for key in dict.fromkeys(k for p in parts for k in p.kept):
            pools = [(p.kept[key], p.seen[key]) for p in parts if p.kept.get(key)]
            seen = [n for _, n in pools]
            out.seen[key] = sum(seen)
            counts = rng.multivariate_hypergeometric(seen, min(cap, sum(seen)))
            out.kept[key] = [
                kept[i]
                for (kept, _), c in zip(pools, counts, strict=True)
                for i in sorted(rng.choice(len(kept), c, replace=False))
            ]
        return out


class Landing:
    """Watches the sweep's player: after every forward pass, a few of its rows' edited states ``key`` (the
    state leaving the step, which the edits wrote) are offered to :class:`Reservoirs` of at most ``cap`` per
    (planned code, planned value) (the baseline's rows under ``(-1, 0.0)``)."""

    def __init__(self, key: str, cap: int, seed: int):
        self.key = key
        self.rng = np.random.default_rng([seed, 23])
        self.reservoirs = Reservoirs(cap, self.rng)

    def __call__(self, codes: Tensor, values: Tensor, state: Mapping[str, Tensor]) -> None:
        out = state[self.key].reshape(len(codes), -1)
        n = len(out)
        dims, values = codes.cpu().numpy(), values.float().cpu().numpy()
        for r in self.rng.choice(n, min(PER_CALL, n), replace=False):
            self.reservoirs.offer(_key(dims[r], values[r]), out[r])


def landing(
    reservoirs: Reservoirs, direction: np.ndarray, values: np.ndarray, recorded: np.ndarray
) -> list[dict]:
    """Per variant ``v`` (``direction[v]``, ``values[v]``): where its kept states lie against the recorded
    states ``recorded`` (``(N, D)``), beside the baseline's (variant 0)."""
    recorded = np.asarray(recorded, np.float64)
    mean, std = recorded.mean(0), recorded.std(0)
    std[std <= 1e-12] = 1.0
    z = (recorded - mean) / std
    dist = []
    for v in range(len(direction)):
        kept = reservoirs.states(int(direction[v]), values[v])
        dist.append(nearest_distance(z, (kept - mean) / std) if len(kept) else np.zeros(0))
    base = dist[0]
    if len(base) == 0:
        return [{"states": len(d)} for d in dist]
    base_median, base_p99 = float(np.median(base)), float(np.percentile(base, 99))
    out = []
    for d in dist:
        if len(d) == 0:
            out.append({"states": 0})
            continue
        out.append(
            {
                "states": len(d),
                "median": float(np.median(d)),
                "median_ratio": float(np.median(d) / max(base_median, 1e-12)),
                "beyond_real_p99": float(np.mean(d > base_p99)),
            }
        )
    return out
