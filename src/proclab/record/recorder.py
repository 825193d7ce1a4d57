"""The recording loop: an agent acts on a vector env; each complete episode goes to a sink as rows.

:class:`EpisodeRecorder` is independent of files and command lines: it hands every finished
episode, laid out by the timestep convention of :mod:`proclab.store.schema`, to a
``sink(steps, episode)`` (a :class:`~proclab.store.writer.ShardWriter`'s ``append``, or
nothing at all for the throughput benchmark).

* Unbiased counts: each env slot records a quota of episodes fixed in advance (as
  ``proclab eval`` does); "the first N episodes to finish" would over-sample short ones.
  Slots that have filled their quota idle (no-op actions, no agent step).
* Both policies: ``logits_clean`` is the agent's output, ``logits`` what the action was
  sampled from after :class:`~proclab.record.noise.ActionNoise`.
* Both rewards: ``reward`` is the env's raw reward; ``reward_norm`` divides it by the
  checkpoint's final running return std and clips it, exactly what the agent was trained on
  at the end of training. The statistics are frozen, so every shard and every resumed run
  normalises identically (the seed re-estimated them from scratch while recording).
* Ground truth (``ground_truth=True``): per step the game's ``features`` of the state the agent
  saw and the ``events`` its action caused, per episode its first game state (``initial_state``,
  procgen's bytes, a blob of the store) and, for CoinRun and Maze, whether it reached each of the game's
  two goals (``goal/coin``, ``goal/end``; ``goal/cheese``, ``goal/corner``), all from
  :mod:`proclab.record.ground_truth`.
* Activations (``cache``: hook names): per step, each named hook point of the agent, as
  ``cache/NAME`` rows of the hook's per-sample shape (what :func:`proclab.rollout` returns as its
  cache; the store does not keep them).
* Episodes in progress are kept per env slot: small fields in a time-major buffer written
  with one vectorised assignment per step, frames and other large rows as per-slot lists
  (memory grows with the episodes in progress, not with the longest one times the slots).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import numpy as np
import torch

from proclab.envs import NOOP
from proclab.envs.episodes import quotas
from proclab.models.cache import time_major
from proclab.models.hooks import capture
from proclab.record.ground_truth import GroundTruth
from proclab.record.noise import ActionNoise
from proclab.rl.rollout import Actor, sample_actions
from proclab.run.runtime import Runtime
from proclab.store.schema import GOAL, INITIAL_STATE, STATE_IN0, STATE_OUT, flatten_state, state_layout

BIG_ROW = 1024  # bytes per row from which a field is kept as per-slot row lists
CACHE = "cache/"
"""Prefix of the per-step activation fields of a recording with ``cache``."""

Sink = Callable[[dict[str, np.ndarray], dict], object]


class _FlagsEnv:
    """Passes ``terminated``/``truncated`` through ``info`` (the actor hands back only their union)."""

    def __init__(self, env):
        self.env = env

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        info["terminated"], info["truncated"] = terminated, truncated
        return obs, reward, terminated, truncated, info


class _Lanes:
    """The rows of each env slot's episode in progress."""

    def __init__(self, num_envs: int, capacity: int = 256):
        self.n, self.capacity = num_envs, capacity
        self.t = 0  # absolute index of the next step
        self.base = 0  # absolute index of row 0 of the small buffers
        self.start = np.zeros(num_envs, np.int64)  # absolute first step of each slot's episode
        self.live = np.ones(num_envs, bool)
        self.small: dict[str, np.ndarray] = {}  # name -> (capacity, N, ...)
        self.big: dict[str, list[list[np.ndarray]]] = {}  # name -> per slot, its rows

    def push(self, rows: dict[str, np.ndarray]) -> None:
        if not self.small and not self.big:
            for name, a in rows.items():
                if a[0].nbytes >= BIG_ROW:
                    self.big[name] = [[] for _ in range(self.n)]
                else:
                    self.small[name] = np.zeros((self.capacity, *a.shape), a.dtype)
        if self.t - self.base == self.capacity:
            self._make_room()
        k = self.t - self.base
        live = np.flatnonzero(self.live)
        for name, a in rows.items():
            if name in self.small:
                self.small[name][k] = a
            else:
                lanes = self.big[name]
                for i in live:
                    lanes[i].append(a[i].copy())
        self.t += 1

    def pop(self, i: int) -> dict[str, np.ndarray]:
        """Slot ``i``'s rows since its episode started; its next episode starts at the next push."""
        a, b = self.start[i] - self.base, self.t - self.base
        out = {name: buf[a:b, i].copy() for name, buf in self.small.items()}
        for name, lanes in self.big.items():
            out[name] = np.stack(lanes[i])
            lanes[i] = []
        self.start[i] = self.t
        return out

    def retire(self, i: int) -> None:
        self.live[i] = False
        for lanes in self.big.values():
            lanes[i] = []

    def _make_room(self) -> None:
        oldest = int(self.start[self.live].min()) if self.live.any() else self.t
        drop, keep = oldest - self.base, self.t - oldest
        capacity = self.capacity * 2 if keep > self.capacity // 2 else self.capacity
        for name, buf in self.small.items():
            new = buf if capacity == self.capacity else np.zeros((capacity, *buf.shape[1:]), buf.dtype)
            new[:keep] = buf[drop : drop + keep]
            self.small[name] = new
        self.base, self.capacity = oldest, capacity


class EpisodeRecorder:
    """Plays ``agent`` on ``env`` and passes every complete episode to a sink (see the module docstring).

    ``env`` follows :class:`~proclab.envs.ProcgenVecEnv` (``games``, ``game_index``,
    ``info["episode"]``, ``info["level_seed"]``); ``agent`` the Agent API plus
    ``state_shapes()``. With ``human=True`` the env must render the 512x512 view
    (``info["human"]``); it is stored channels-first as ``obs_human``.
    """

    def __init__(
        self,
        env,
        agent,
        runtime: Runtime,
        *,
        noise: ActionNoise | None = None,
        reward_scale: float = 1.0,
        reward_clip: float | None = None,
        state_dtype: str = "float32",
        human: bool = False,
        split: str = "",
        greedy: bool = False,
        ground_truth: bool = False,
        cache: list[str] | None = None,
        with_slot: bool = False,
        playing: Callable[[np.ndarray], AbstractContextManager] | None = None,
    ):
        self.env, self.agent, self.rt = env, agent, runtime
        self.noise = noise or ActionNoise()
        self.reward_scale = reward_scale
        self.reward_clip = math.inf if reward_clip is None else reward_clip
        self.state_dtype = np.dtype(state_dtype)
        self.human = human
        self.split = split
        self.greedy = greedy  # argmax of the (noised) logits instead of a sample
        self.ground_truth = ground_truth
        self.cache = cache or []
        self.with_slot = with_slot  # each episode's info names the env slot that played it
        # told, around every forward pass, which episode each computed row plays (slot i's k-th episode is
        # number i + k N): per-episode edits address episodes, though the batch shrinks as slots finish
        self.playing = playing
        self.layouts = {name: agent.hook_points()[name].layout for name in self.cache} if cache else {}
        self.layout = state_layout(agent.state_shapes())
        initial = {
            k: v.float().cpu().numpy() for k, v in agent.initial_state(1, device=runtime.device).items()
        }
        self.state_in0 = {
            STATE_IN0 + layer: v[0].astype(self.state_dtype)
            for layer, v in flatten_state(initial, self.layout).items()
        }

    def run(
        self,
        episodes: int,
        sink: Sink,
        tick: Callable[[], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> int:
        """Record ``episodes`` complete episodes (split over the env slots); returns how many. Once ``stop()``
        says so, no slot starts another episode (each finishes the one it is in)."""
        env, rt = _FlagsEnv(self.env), self.rt
        N = env.num_envs
        quota = quotas(episodes, N)
        counts = np.zeros(N, np.int64)
        active = quota > 0
        actor = Actor(env, self.agent, rt)
        lanes = _Lanes(N)
        for i in np.flatnonzero(~active):
            lanes.retire(i)
        truth = GroundTruth(self.env) if self.ground_truth else None
        level_seed = np.asarray(actor.reset_info["level_seed"], np.int64)
        human = actor.reset_info.get("human")
        ep_step = np.zeros(N, np.int32)
        while active.any():
            idx = np.flatnonzero(active)
            rows_t = None if len(idx) == N else torch.from_numpy(idx).to(rt.device)
            playing = self.playing(idx + counts[idx] * N) if self.playing is not None else nullcontext()
            with (
                capture(self.agent, self.cache, detach=True) if self.cache else nullcontext() as acts,
                playing,
            ):
                out, state = actor.forward(rows_t)
            with torch.inference_mode():
                clean = out.logits.float()
                logits = self.noise(clean) if self.noise else clean
                action, _ = sample_actions(logits, self.greedy)
            rows = {
                "obs": actor.obs.cpu().numpy(),
                "action": _full(N, idx, action, NOOP),
                "logits": _full(N, idx, logits),
                "logits_clean": _full(N, idx, clean),
                "value": _full(N, idx, out.value.float()),
                "step": ep_step.copy(),
                "level_seed": level_seed,
            }
            if self.human:
                rows["obs_human"] = human.transpose(0, 3, 1, 2)
            if truth is not None:
                rows["features"] = truth.features()
            for name in self.cache:
                act = time_major(acts.calls(name), self.layouts[name], 1, len(idx))[0]
                rows[CACHE + name] = _full(N, idx, act.float())
            flat = flatten_state({k: v.float().cpu().numpy() for k, v in state.items()}, self.layout)
            rows |= {STATE_OUT + layer: v.astype(self.state_dtype, copy=False) for layer, v in flat.items()}
            act = torch.from_numpy(rows["action"]).to(rt.device)
            reward, done, info = actor.env_step(act, state)
            raw = np.asarray(info.get("raw_reward", reward), np.float32)
            rows["reward"] = raw
            rows["reward_norm"] = np.clip(
                raw / self.reward_scale, -self.reward_clip, self.reward_clip
            ).astype(np.float32)
            rows["terminated"], rows["truncated"] = info["terminated"], info["truncated"]
            if truth is not None:
                complete = info["episode"]["level_complete"]
                rows["events"] = truth.step(raw, info["terminated"], info["truncated"], complete)
            lanes.push(rows)
            ep_step += 1
            ep = info["episode"]
            for i in np.flatnonzero(done & active):
                steps = lanes.pop(i)
                if len(steps["obs"]) != ep["length"][i]:
                    raise RuntimeError(
                        f"env slot {i}: recorded {len(steps['obs'])} steps, env says {ep['length'][i]}"
                    )
                sink(steps, self._episode_info(ep, i, truth))
                counts[i] += 1
                if counts[i] == quota[i] or (stop is not None and stop()):
                    active[i] = False
                    lanes.retire(i)
            ep_step[done] = 0
            level_seed = np.asarray(info["level_seed"], np.int64)
            human = info.get("human")
            if tick is not None:
                tick()
        return int(counts.sum())

    def _episode_info(self, ep: dict, i: int, truth: GroundTruth | None) -> dict:
        """The per-episode values of slot ``i``'s episode that just ended (``ep``: the env's ``info["episode"]``)."""
        slot = {"slot": int(i)} if self.with_slot else {}
        return slot | {
            "game": self.env.games[self.env.game_index[i]],
            "split": self.split,
            "level_seed": int(ep["level_seed"][i]),
            "return": float(ep["return"][i]),
            "level_complete": bool(ep["level_complete"][i]),
            **self.state_in0,
            **({INITIAL_STATE: truth.finished[i]} if truth is not None else {}),
            **(
                {GOAL + name: reached for name, reached in truth.finished_goals[i].items()}
                if truth is not None
                else {}
            ),
        }


def _full(n: int, idx: np.ndarray, values: torch.Tensor, fill=0) -> np.ndarray:
    """Values of the active rows ``idx`` scattered into an ``n``-row array (``fill`` elsewhere)."""
    v = values.cpu().numpy()
    if len(idx) == n:
        return v
    out = np.full((n, *v.shape[1:]), fill, v.dtype)
    out[idx] = v
    return out
