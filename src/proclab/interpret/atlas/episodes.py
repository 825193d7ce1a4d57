"""The episodes an atlas describes, recorded in a store or held by a rollout in memory, behind one interface.

An atlas reads of its episodes: their lengths, per-step fields (value, reward, action), whether each
completed its level, the game's ground-truth features, frames around a moment, and, to replay one step
of the agent, that step's frame, the state the agent entered it with and the raw reward of the step
before (0 at an episode's first step). :class:`StoreEpisodes` reads them from an episode store
(``analyze atlas``), :class:`RolloutEpisodes` from a :class:`~proclab.record.rollout.Rollout` and the
state tensors the described agent left each of its steps with (``proclab.analyze.atlas``).
Rows of per-step fields are the episodes' steps concatenated in the order of ``ids``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from proclab.record.ground_truth import ground_truth_names
from proclab.store.schema import GROUND_TRUTH_ATTR, STATE_IN, unflatten_state
from proclab.store.state_codec import StateCodec

STEP_FIELDS = ("value", "reward", "action")
"""The per-step fields an atlas tracks (besides the ground truth)."""


def _as_tensors(obs: np.ndarray, state: dict[str, np.ndarray], prev: np.ndarray, device):
    as_t = lambda x: torch.as_tensor(np.asarray(x), device=device)  # noqa: E731
    return as_t(obs).float() / 255, {k: as_t(v).float() for k, v in state.items()}, as_t(prev).float()


class StoreEpisodes:
    """Episodes ``ids`` of an episode store."""

    def __init__(self, store, ids: np.ndarray):
        self.store, self.ids = store, np.asarray(ids)
        self.lengths = np.asarray(store.episodes["length"][self.ids], np.int64)

    def steps(self, name: str) -> np.ndarray | None:
        """Per-step field ``name`` (one of :data:`STEP_FIELDS`), None when the store has none."""
        return self.store.read_steps(name, self.ids) if name in self.store.step_fields else None

    def level_complete(self) -> np.ndarray | None:
        """Per episode, whether it completed its level (None when the store does not say)."""
        store = self.store
        if "level_complete" in store.episode_fields or "level_complete" in store.episodes:
            return store.read_episode_field("level_complete", self.ids).astype(bool)
        return None

    def features(self) -> tuple[list[str], np.ndarray] | None:
        """The ground-truth features' names and per-step values ``(N, F)`` (None without ground truth)."""
        if "features" not in self.store.step_fields:
            return None
        shards = self.store.shards
        names = next(
            (s.attrs[GROUND_TRUTH_ATTR]["features"] for s in shards if GROUND_TRUTH_ATTR in s.attrs), None
        )
        return (list(names), self.store.read_steps("features", self.ids)) if names else None

    def frames(self, episode: int, lo: int, hi: int) -> np.ndarray:
        """Frames ``lo .. hi - 1`` of ``episode``, ``(n, 3, H, W)`` uint8."""
        return self.store.read(episode, ["obs"], lo, hi)["obs"]

    def step_inputs(
        self, rows: list[tuple[int, int]], codec: StateCodec, device
    ) -> tuple[Tensor, dict, Tensor]:
        """For steps (episode, t): the frames ``(R, 3, H, W)`` as floats in [0, 1], the agent state entering
        each step and the raw reward of the step before, as
        :func:`~proclab.interpret.saliency.real_frames.load_window` gives them for one step, but reading each
        episode once (one span covering all of its rows)."""
        layers = [STATE_IN + layer for layer in codec.layout]
        obs, states, prev = [None] * len(rows), [None] * len(rows), np.zeros(len(rows), np.float32)
        by_episode: dict[int, list[int]] = {}
        for i, (e, _) in enumerate(rows):
            by_episode.setdefault(e, []).append(i)
        for e, members in by_episode.items():
            lo, hi = min(rows[i][1] for i in members), max(rows[i][1] for i in members) + 1
            got = self.store.read(e, ["obs", "reward", *layers], max(lo - 1, 0), hi)
            shift = 1 if lo > 0 else 0  # row 0 of the span is the step before lo, for its reward
            for i in members:
                j = rows[i][1] - lo + shift
                obs[i] = got["obs"][j]
                states[i] = {k.removeprefix(STATE_IN): got[k][j] for k in layers}
                prev[i] = got["reward"][j - 1] if j > 0 else 0.0
        flat = {k: np.stack([s[k] for s in states]) for k in states[0]}
        return _as_tensors(np.stack(obs), unflatten_state(flat, self.store.state_layout), prev, device)


class RolloutEpisodes:
    """The episodes of a rollout, with ``states`` the state tensors ``(T, B, ...)`` the described agent left
    each step with and ``initial`` the state it starts an episode from (per tensor, one row's shape)."""

    def __init__(self, rollout, states: dict[str, np.ndarray], initial: dict[str, np.ndarray]):
        self.rollout, self.states, self.initial = rollout, states, initial
        self.ids = np.arange(rollout.num_episodes)
        self.lengths = np.asarray(rollout.lengths, np.int64)
        self._episode, self._step = np.nonzero(
            np.asarray(rollout.mask).T
        )  # episode by episode, as a store is read

    def rows(self, a) -> np.ndarray:
        """A ``(T, B, ...)`` array or tensor's played steps, episode by episode: ``(N, ...)``."""
        return np.asarray(a)[self._step, self._episode]

    def steps(self, name: str) -> np.ndarray | None:
        ro = self.rollout
        return self.rows({"value": ro.values, "reward": ro.rewards, "action": ro.actions}[name])

    def level_complete(self) -> np.ndarray:
        return np.asarray(self.rollout.level_complete, bool)

    def features(self) -> tuple[list[str], np.ndarray] | None:
        names = [n for n in ground_truth_names([self.rollout.game])["features"] if n in self.rollout.truth]
        if not names:
            return None
        return names, np.stack([self.rows(self.rollout.truth[n]) for n in names], 1)

    def frames(self, episode: int, lo: int, hi: int) -> np.ndarray:
        return self.rollout.obs[lo:hi, episode].numpy()

    def step_inputs(
        self, rows: list[tuple[int, int]], codec: StateCodec, device
    ) -> tuple[Tensor, dict, Tensor]:
        """As :meth:`StoreEpisodes.step_inputs`, from the rollout's arrays and the agent's states."""
        e = np.array([r[0] for r in rows])
        t = np.array([r[1] for r in rows])
        before = np.maximum(t - 1, 0)
        first = t == 0
        state = {}
        for k, v in self.states.items():
            entering = v[before, e].astype(np.float32)
            entering[first] = self.initial[k]
            state[k] = entering
        prev = np.where(first, 0.0, self.rollout.rewards.numpy()[before, e]).astype(np.float32)
        return _as_tensors(self.rollout.obs.numpy()[t, e], state, prev, device)
