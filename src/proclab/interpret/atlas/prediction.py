"""Predicted against measured: do gradients rank the effects that real-environment edits have?

The interpretation seed's write-up, "saliency as causality", reads a direction's role off
gradients. Here that reading is tested. **Predicted**: at recorded states (a seeded sample of
analysed steps), the first-order change an edit makes to the agent's outputs, from the gradients
of the value ``V`` and of the action probabilities ``pi`` w.r.t. the state, taken along the
direction's state-space vector ``d_m`` (:meth:`Coordinates.directions`) and times the edit's size
at that state, ``Delta_t = v - c_m(t)`` (``v`` the value the sweep's arm held the coordinate at; a
fresh recorded value per state for ``resample``):

* value: ``mean_t (dV/dh . d_m) Delta_t``;
* actions: the total-variation distance ``0.5 sum_a |mean_t (dpi_a/dh . d_m) Delta_t|``.

**Measured**: the sweep's change in return and its TV distance of the pooled action frequencies
for the same (direction, arm). Only on-data edits enter (an edit off the data describes states the
agent never visits). **Across directions**: the Spearman rank correlation of predicted against
measured over every on-data (direction, arm), *magnitudes against magnitudes* (``|value change|``
against ``|return change|``: a signed ranking would mostly rank the sign of the mostly negative
return changes), with a percentile bootstrap interval that resamples *directions* (each with all
its arms), since the arms of one direction are not independent. The gradients are one step's, of
the state the heads read; the sweep holds the coordinate for whole episodes, so the test is whether
a local, one-step reading ranks the global, closed-loop effect.

What makes a rho mean something, per pairing:

* ``p_permutation``: the one-sided permutation p-value of rho when the predictions are shuffled
  over the directions within each arm (the null "gradients know nothing about which direction
  matters", keeping the arms' own scales);
* ``baselines``: the rho of two predictors that know nothing of gradients, the edit's size alone
  (``mean_t |Delta_t| |d_m|``, the state-space distance it moves) and *shuffled gradients*
  (the same gradients with their state units permuted at random, so their size is kept and their
  alignment with the directions lost). Gradients add something only where they beat these;
* ``noise_ceiling``: the sweep measures each effect on the even and on the odd levels apart; the
  Spearman of the two halves, stepped up to the full set by Spearman-Brown, is the reliability of
  the measured ranking, and ``rho / sqrt(reliability)`` the rho corrected for attenuation (the
  predictions' own noise is taken as nil: one fixed sample of states). A rho near the ceiling is
  as high as the measurements allow.
"""

from __future__ import annotations

import numpy as np
import torch

from proclab.models.hooks import patch
from proclab.stats.bootstrap import bootstrap_ci
from proclab.stats.correlation import spearman
from proclab.stats.permutation import permutation_p as p_value
from proclab.store.state_codec import StateCodec

BATCH = 256
PAIRINGS = {
    "value": ("return", "predicted |change of the value V| against the measured |change in return|"),
    "actions": ("tv_distance", "predicted TV distance of the action probabilities against the measured TV"),
}


def head_gradients(
    agent, hook: str, recorded, rows: list[tuple[int, int]], device
) -> tuple[np.ndarray, np.ndarray]:
    """At states (episode, step) of the episodes ``recorded``: ``dV/dh`` ``(R, D)`` and ``dpi/dh``
    ``(R, A, D)`` of the state that leaves the step (its per-step hook point ``hook``), replaying the step
    from the state it entered with."""
    codec = StateCodec(agent.state_shapes())
    gv, gpi = [], []
    for lo in range(0, len(rows), BATCH):
        obs, state, prev = recorded.step_inputs(rows[lo : lo + BATCH], codec, device)
        prev = prev[None] if agent.config.prev_reward else None
        v, pi = _batch_gradients(agent, hook, obs[None], state, prev)
        gv.append(v)
        gpi.append(pi)
    return np.concatenate(gv), np.concatenate(gpi)


def _batch_gradients(agent, hook: str, obs, state, prev) -> tuple[np.ndarray, np.ndarray]:
    """One step of a batch: the value's and each action probability's gradient w.r.t. the state, read as
    the gradient w.r.t. a zero added to it at its hook point."""
    bump: list[torch.Tensor] = []

    def add(h: torch.Tensor) -> torch.Tensor:
        eps = torch.zeros_like(h, requires_grad=True)
        bump.append(eps)
        return h + eps

    firsts = torch.zeros(obs.shape[:2], dtype=torch.bool, device=obs.device)
    with torch.enable_grad(), patch(agent, hook, add):
        out, _ = agent.unroll(obs, state, firsts, prev)
        value, probs = out.value[0].float(), out.logits[0].float().softmax(-1)
        (eps,) = bump
        outputs = [value.sum(), *(probs[:, a].sum() for a in range(probs.shape[1]))]
        grads = [
            torch.autograd.grad(y, eps, retain_graph=True, allow_unused=True)[0] if y.requires_grad else None
            for y in outputs
        ]
    B = obs.shape[1]
    flat = [(torch.zeros_like(eps) if g is None else g).reshape(B, -1).double().cpu() for g in grads]
    return flat[0].numpy(), torch.stack(flat[1:], 1).numpy()


def predicted_changes(
    gv: np.ndarray, gpi: np.ndarray, direction: np.ndarray, coord: np.ndarray, held: np.ndarray
) -> dict[str, float]:
    """First-order changes of one edit at the sampled states: ``held`` ``(R,)`` the values the edit
    puts coordinate ``coord`` ``(R,)`` at, ``direction`` ``(D,)`` its state vector."""
    delta = np.asarray(held, np.float64) - np.asarray(coord, np.float64)
    dv = float(np.mean((gv @ direction) * delta))
    dpi = np.mean((gpi @ direction) * delta[:, None], axis=0)
    return {"value": dv, "actions": float(0.5 * np.abs(dpi).sum())}


def spearman_by_groups(x: np.ndarray, y: np.ndarray, groups: np.ndarray, reps: int, seed: int) -> dict:
    """Spearman of ``x`` and ``y`` over all points and its percentile interval from resampling the
    ``groups`` (directions) with replacement, each with all its points."""
    x, y, groups = np.asarray(x, np.float64), np.asarray(y, np.float64), np.asarray(groups)
    ci = bootstrap_ci(spearman, (x, y), reps, seed, clusters=groups)
    return {"rho": spearman(x, y), "ci95": list(ci), "points": len(x), "directions": len(np.unique(groups))}


def permutation_p(x: np.ndarray, y: np.ndarray, arms: np.ndarray, reps: int, seed: int) -> float:
    """One-sided p-value of ``spearman(x, y)`` against ``x`` permuted over the directions within each arm
    (each arm's points are one per direction)."""
    x, y, arms = np.asarray(x, np.float64), np.asarray(y, np.float64), np.asarray(arms)
    observed = spearman(x, y)
    if not np.isfinite(observed):
        return float("nan")
    rng = np.random.default_rng([seed, 9])
    blocks = [np.flatnonzero(arms == a) for a in np.unique(arms)]
    null = np.empty(reps)
    for r in range(reps):
        shuffled = x.copy()
        for idx in blocks:
            shuffled[idx] = x[rng.permutation(idx)]
        null[r] = spearman(shuffled, y)
    return p_value(observed, null, 1e-12)


def noise_ceiling(half_a: np.ndarray, half_b: np.ndarray, rho: float) -> dict:
    """Split-half reliability of the measured effects (Spearman of the halves, Spearman-Brown stepped up)
    and ``rho`` corrected for attenuation by it (None where the halves do not agree at all)."""
    split = spearman(half_a, half_b)
    reliability = 2 * split / (1 + split) if np.isfinite(split) and split > 0 else None
    corrected = None if reliability is None or not np.isfinite(rho) else rho / np.sqrt(reliability)
    return {"split_half": split, "reliability": reliability, "rho_corrected": corrected}


def pairing(points: list[dict], key: str, reps: int, seed: int) -> dict:
    """One pairing's numbers over the on-data edits ``points``: rho of the predicted magnitude against the
    measured one with its interval over directions, its permutation p-value, the baselines' rhos and
    the noise ceiling (see the module docstring)."""
    groups = np.array([p["direction"] for p in points])
    arms = np.array([p["arm"] for p in points])
    x = np.abs([p["predicted"][key] for p in points])
    y = np.abs([p["measured"][key] for p in points])
    res = spearman_by_groups(x, y, groups, reps, seed)
    res["p_permutation"] = permutation_p(x, y, arms, reps, seed) if len(points) > 2 else float("nan")
    res["baselines"] = {
        "edit_size": spearman(np.array([p["edit_size"] for p in points]), y),
        "shuffled_gradients": spearman(np.abs([p["shuffled"][key] for p in points]), y),
    }
    if all("halves" in p for p in points):
        a, b = (np.abs([p["halves"][key][i] for p in points]) for i in (0, 1))
        res["noise_ceiling"] = noise_ceiling(a, b, res["rho"])
    return res


def verdict(result: dict, what: str) -> str:
    """One plain sentence about one pairing."""
    rho, (lo, hi), n, d = result["rho"], result["ci95"], result["points"], result["directions"]
    over = f"Spearman rho = {rho:+.2f} [{lo:+.2f}, {hi:+.2f}] over {n} on-data edits of {d} directions"
    if n < 4 or d < 3 or not np.isfinite(rho):
        return f"{what}: too few on-data edits with effects to test ({n} edits of {d} directions)"
    if lo > 0:
        return f"{what}: gradients rank the measured effects ({over})"
    if hi < 0:
        return f"{what}: FAILS, gradients rank the measured effects in reverse ({over})"
    return f"{what}: FAILS, gradients do not rank the measured effects ({over}; the interval includes 0)"
