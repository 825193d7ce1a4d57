"""How far the agent's dreamed states lie from real ones, against real states of *other* episodes.

A dreamed agent state is judged by its distance to the nearest real state (z-scored with the
reference states' mean and spread, as ``analyze hidden`` does). What makes that distance small or
large needs a baseline: the same distance for real states the dream should have matched. If the
reference holds states of the query's own episode, a real state's nearest neighbour is usually
its own predecessor one step earlier, and the baseline is biased low. Here every query, dreamed or
real, is compared only with reference states of **other episodes** (leave one episode out), so the
real baseline is the distance of an unseen episode's state to the rest of the data, and the dreamed
state from that episode's start faces exactly the same reference.
"""

from __future__ import annotations

import numpy as np
import torch


def reference_states(states: list[np.ndarray], most: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """All episodes' states ``(T_e, D)`` stacked, with each row's episode; a seeded subsample of ``most``."""
    x = np.concatenate(states).astype(np.float32)
    episode = np.concatenate([np.full(len(s), e) for e, s in enumerate(states)])
    if len(x) > most:
        rows = np.sort(np.random.default_rng(seed).choice(len(x), most, replace=False))
        x, episode = x[rows], episode[rows]
    return x, episode


def nearest_other_episode(
    reference: np.ndarray, ref_episode: np.ndarray, queries: np.ndarray, query_episode: np.ndarray
) -> np.ndarray:
    """Distance of each query to its nearest reference state from another episode (z-scored units).

    Inf where the reference holds no other episode.
    """
    mu, sd = reference.mean(0), reference.std(0) + 1e-6
    ref = torch.from_numpy((reference - mu) / sd).double()
    ref_ep = torch.from_numpy(ref_episode)
    out = np.empty(len(queries))
    for lo in range(0, len(queries), 1024):
        q = torch.from_numpy((queries[lo : lo + 1024] - mu) / sd).double()
        d = torch.cdist(q, ref)
        same = torch.from_numpy(query_episode[lo : lo + 1024]).unsqueeze(1) == ref_ep.unsqueeze(0)
        out[lo : lo + 1024] = d.masked_fill(same, float("inf")).min(1).values.numpy()
    return out


def drift_summary(dreamed: np.ndarray, real: np.ndarray, steps: np.ndarray) -> dict:
    """Quantiles of the dreamed and real nearest-other-episode distances, their median ratio (the
    criterion), and both medians per simulated step (keyed by the step as a string, as JSON keys it)."""

    def quantiles(d: np.ndarray) -> dict[str, float]:
        return {f"p{q}": float(np.percentile(d, q)) for q in (10, 50, 90)}

    by_step = {}
    for k in np.unique(steps):
        at = steps == k
        by_step[str(int(k))] = {"dreamed": float(np.median(dreamed[at])), "real": float(np.median(real[at]))}
    return {
        "states": len(dreamed),
        "dreamed": quantiles(dreamed),
        "real_held_out": quantiles(real),
        "median_ratio": float(np.median(dreamed) / max(np.median(real), 1e-12)),
        "median_by_step": by_step,
    }
