"""Steering vectors from contrastive level states, and targets to steer towards.

A *contrastive pair* is one level's first game state with an entity and the same state with every
instance of that kind removed (:func:`proclab.envs.state.remove_entities`; the cheese of a maze is a
cell and is removed as one). The steering vector at a hook is the mean, over pairs, of the
activation on the first frame *with* minus *without* (Mini et al. 2023's "cheese vector"), of the
hook's full per-sample shape: for a conv map it keeps where the difference lies. Any two sets of
level states give a vector the same way (:func:`contrast_vector`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from proclab.envs.state import glossary, parse_state, positions, remove_entities, serialize_state, to_pixels
from proclab.errors import ProclabError
from proclab.models.edited import hook_shapes
from proclab.models.hooks import capture, device_of


def first_frames(env, states: Sequence[bytes]) -> np.ndarray:
    """``(N, 3, 64, 64)`` first frame of each level state, loaded ``env.num_envs`` at a time."""
    frames = []
    for lo in range(0, len(states), env.num_envs):
        part = states[lo : lo + env.num_envs]
        for slot, s in enumerate(part):
            env.load(slot, s)
        frames.append(env.observe()[: len(part)])
    return np.concatenate(frames)


def without(states: Sequence[bytes], kind: str) -> tuple[list[bytes], list[bytes]]:
    """The states that hold ``kind`` and each of them with every ``kind`` removed (a contrastive pair)."""

    kept, removed = [], []
    for s in states:
        state = parse_state(s)
        if len(positions(state, kind)):
            kept.append(s)
            removed.append(serialize_state(remove_entities(state, kind)))
    if not kept:
        raise ProclabError(f"none of the {len(states)} levels holds a {kind!r}; choose another --entity")
    return kept, removed


@torch.inference_mode()
def _activations(agent, hook: str, frames: np.ndarray, batch: int = 64) -> Tensor:
    """``(N, *shape)`` activation at ``hook`` on the first step (fresh state) on each frame, on the agent's
    device."""

    shape = hook_shapes(agent)[hook]
    device = device_of(agent)
    parts = []
    for lo in range(0, len(frames), batch):
        obs = torch.as_tensor(frames[lo : lo + batch], device=device)
        b = len(obs)
        prev = torch.zeros(b, device=device) if agent.config.prev_reward else None
        with capture(agent, hook, detach=True) as acts:
            agent.step(
                obs,
                agent.initial_state(b, device=device),
                torch.ones(b, dtype=torch.bool, device=device),
                prev,
            )
        parts.append(acts[hook].reshape(b, *shape).float().cpu())
    return torch.cat(parts)


def mean_activation(agent, hook: str, frames: np.ndarray) -> Tensor:
    """Mean activation at ``hook`` over the first step (fresh state) on each frame."""
    return _activations(agent, hook, frames).mean(0)


def contrast_vector(agent, hook: str, frames_a: np.ndarray, frames_b: np.ndarray) -> Tensor:
    """Mean activation at ``hook`` on ``frames_a`` minus that on ``frames_b``."""
    return mean_activation(agent, hook, frames_a) - mean_activation(agent, hook, frames_b)


def level_vectors(
    agent, hook: str, states: Sequence[bytes], kind: str, frames_of
) -> tuple[Tensor, np.ndarray]:
    """Per level, its own with-minus-without activation difference at ``hook`` (zero where the level has
    no ``kind``), and which levels have one; ``frames_of(states)`` renders first frames."""

    have = np.array([len(positions(parse_state(s), kind)) > 0 for s in states])
    vectors = torch.zeros((len(states), *hook_shapes(agent)[hook]))
    if have.any():
        kept = [s for s, h in zip(states, have, strict=True) if h]
        removed = [serialize_state(remove_entities(parse_state(s), kind)) for s in kept]
        a, b = (_activations(agent, hook, frames_of(x)) for x in (kept, removed))
        vectors[torch.as_tensor(have)] = a - b
    return vectors, have


def target_cells(states: Sequence[bytes], kind: str, seed: int) -> np.ndarray:
    """Per level, the world centre ``(x, y)`` of a grid cell of ``kind`` (e.g. ``space``) drawn at random at
    least 2 cells from the agent's start, for retargeting (cell ``(row, col)`` has centre ``(col + .5,
    row + .5)``, as in :mod:`proclab.envs.state`)."""

    rng = np.random.default_rng([seed, 3])
    out = np.zeros((len(states), 2))
    for i, s in enumerate(states):
        state = parse_state(s)
        rows, cols = np.nonzero(state.grid == glossary(state.game).type_of(kind))
        cells = np.stack([cols + 0.5, rows + 0.5], 1)
        far = cells[np.abs(cells - [state.agent.x, state.agent.y]).max(1) >= 2]
        if not len(far):
            raise ProclabError(f"level {i} has no {kind!r} cell away from the agent to retarget to")
        out[i] = far[rng.integers(len(far))]
    return out


def map_sites(states: Sequence[bytes], xy: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Flat index ``y * W + x`` in a ``(C, H, W)`` map of each level's world point ``xy`` (through
    :func:`proclab.envs.state.to_pixels` of the level's first frame)."""

    h, w = shape[1], shape[2]
    out = np.zeros(len(states), np.int64)
    for i, s in enumerate(states):
        px, py = to_pixels(parse_state(s), xy[i, 0], xy[i, 1])
        out[i] = int(np.clip(py * h / 64, 0, h - 1)) * w + int(np.clip(px * w / 64, 0, w - 1))
    return out


def kinds_present(states: Sequence[bytes], kinds: Sequence[str]) -> np.ndarray:
    """``bool (levels, kinds)``: which kinds each level state holds at least one of."""
    out = np.zeros((len(states), len(kinds)), bool)
    for i, s in enumerate(states):
        state = parse_state(s)
        out[i] = [len(positions(state, kind)) > 0 for kind in kinds]
    return out


def instance_vectors(agent, hook: str, states: Sequence[bytes], goal: str, frames_of, seed: int) -> Tensor:
    """Per level, the with-minus-without difference at ``hook`` of one instance of a kind other than the
    goal (an entity or a grid cell, drawn at random among every such instance of the level: a wall cell
    in a maze), zero where a level has none: the control that asks whether removing *anything* of the
    level moves the activation the way removing the goal does. ``frames_of(states)`` renders first
    frames."""

    rng = np.random.default_rng([seed, 13])
    kinds = [k for k in glossary(parse_state(states[0]).game).feature_kinds() if k != goal]
    kept, removed, have = [], [], np.zeros(len(states), bool)
    for i, s in enumerate(states):
        state = parse_state(s)
        found = [(kind, xy) for kind in kinds for xy in positions(state, kind)]
        if not found:
            continue
        kind, (cx, cy) = found[rng.integers(len(found))]
        kept.append(s)

        def here(x, y, cx=cx, cy=cy):
            return abs(x - cx) < 1e-6 and abs(y - cy) < 1e-6

        removed.append(serialize_state(remove_entities(state, kind, here)))
        have[i] = True
    vectors = torch.zeros((len(states), *hook_shapes(agent)[hook]))
    if have.any():
        a, b = (_activations(agent, hook, frames_of(x)) for x in (kept, removed))
        vectors[torch.as_tensor(have)] = a - b
    return vectors


def same_norm(directions: Tensor, norms: Tensor) -> Tensor:
    """``directions`` ``(L, ...)`` rescaled so that row ``l`` has norm ``norms[l]`` (zero rows stay zero)."""
    flat = directions.flatten(1)
    scale = norms / flat.norm(dim=1).clamp_min(1e-12)
    return (flat * scale[:, None]).view_as(directions)


def random_directions(shape: Sequence[int], norms: Tensor, draws: int, seed: int, shared: bool) -> Tensor:
    """``(draws, L, *shape)``: per draw a Gaussian direction per level (``shared``: one for every level, as a
    mean vector is) of norm ``norms[l]`` on level ``l``: the same-norm random control of a steering vector."""

    levels = len(norms)
    out = torch.empty((draws, levels, *shape))
    for d in range(draws):
        g = torch.Generator().manual_seed(int(np.random.default_rng([seed, 11, d]).integers(2**62)))
        raw = torch.randn((1 if shared else levels, *shape), generator=g).expand(levels, *shape)
        out[d] = same_norm(raw, norms)
    return out
