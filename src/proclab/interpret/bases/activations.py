"""One activation per step of many episodes, as an ``(N, D)`` float32 matrix with episode/step indices.

Two kinds of source:

* a **recorded state**: ``state_out/core.L`` (the whole layer as stored) or one of its tensors
  ``state_out/core.L.NAME`` (cut out through the store's state layout, so an LSTM's ``h`` and
  ``c`` or a fast-weight core's ``F`` are separable), and the same with ``state_in/`` (the state
  entering each step, derived by the store). A bare ``core.L.NAME`` means ``state_out/``: row
  ``t``'s state leaving step ``t`` is the one that produced row ``t``'s logits, value and action;
* a **hook point** ``hook:NAME`` (any name of ``agent.hook_names()``, e.g. ``hook:torso.hook_fc``,
  which also works for feed-forward agents): the agent is replayed on the stored frames,
  batched over episodes, starting each episode from its stored ``state_in0`` (the state it
  actually entered its first step with, so recordings and world-model samples replay alike)
  and fed the stored previous raw reward when the agent reads it. A store without states
  starts from the agent's initial state with ``first`` set at each episode's first step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from proclab.errors import ProclabError, unknown_choice
from proclab.models.hooks import capture, device_of
from proclab.models.interventions import state_hook
from proclab.models.loading import load_agent
from proclab.run.runtime import Runtime, make_runtime
from proclab.store.schema import STATE_IN, STATE_IN0, STATE_OUT, layer_width, unflatten_state
from proclab.store.store import EpisodeStore

HOOK = "hook:"


def hook_key(hook: str, agent) -> str:
    """The internal name of the activation at hook point ``hook`` of ``agent``: the state tensor a recurrent
    core carries through it (``core.0.hook_h`` -> ``core.0.h``: the sweep and the atlas need its start value
    and hold its coordinates in the state), else ``hook:NAME``. The API names hook points only; a state key
    is refused with its hook's name."""
    states = {state_hook(key): key for key in agent.state_shapes()} if agent is not None else {}
    if hook in states:
        return states[hook]
    if hook in states.values():
        raise ProclabError(f"{hook!r} is a state key; name its hook point, {state_hook(hook)!r}")
    return HOOK + hook


def rollout_activations(rollout, hook: str) -> Activations:
    """Hook ``hook`` at every played step of ``rollout`` (its cache, packed: episode by episode, as a store is
    read), ``(N, D)`` float32, its source named as a store names it (``state_out/core.0.h`` for a state's hook,
    ``hook:NAME`` otherwise)."""
    key = hook_key(hook, rollout.agent)  # a state key is refused first, with its hook's name
    if hook not in rollout.cache:
        raise ProclabError(
            f"the rollout cached no hook {hook!r} (its cache: {', '.join(rollout.cache) or 'none'}); "
            f"play it with cache=[{hook!r}]"
        )
    values, episode, step = rollout.cache.packed(hook)
    source = key if key.startswith(HOOK) else STATE_OUT + key
    x = np.ascontiguousarray(values.reshape(len(values), -1).float().numpy())
    return Activations(x, episode.numpy().astype(np.int64), step.numpy().astype(np.int64), source)


@dataclass(frozen=True)
class Activations:
    """``x[i]`` is the activation at step ``step[i]`` of episode ``episode[i]`` (store indices)."""

    x: np.ndarray  # (N, D) float32
    episode: np.ndarray  # (N,) int64
    step: np.ndarray  # (N,) int64
    source: str  # canonical name, e.g. "state_out/core.0.h" or "hook:torso.hook_fc"

    def __len__(self) -> int:
        return len(self.x)


def store_source(store: EpisodeStore, hook: str | None) -> str:
    """The store's name of the activation at hook point ``hook``: a recurrent state's hook names the state the
    store recorded (``core.0.hook_h`` -> ``state_out/core.0.h``), any other hook is replayed (``hook:NAME``); a
    name of the store's own (``state_in/core.0.h``, ``hook:NAME``) is taken as it is; None: the first state
    tensor (:func:`default_source`). A state key is refused with its hook's name, as :func:`hook_key` does."""
    if hook is None:
        return default_source(store)
    if hook.startswith((STATE_OUT, STATE_IN, HOOK)):
        return canonical_source(store, hook)
    states = {state_hook(key): key for parts in store.state_layout.values() for key, _ in parts}
    if hook in states.values():
        raise ProclabError(f"{hook!r} is a state key; name its hook point, {state_hook(hook)!r}")
    return canonical_source(store, STATE_OUT + states[hook] if hook in states else HOOK + hook)


def state_sources(store: EpisodeStore) -> dict[str, tuple[str, slice]]:
    """Recorded state sources of a store: canonical name -> (stored field, columns of it)."""
    layout = store.state_layout
    out: dict[str, tuple[str, slice]] = {}
    for prefix in (STATE_OUT, STATE_IN):
        for field in store.fields:
            if not field.startswith(prefix):
                continue
            layer = field.removeprefix(prefix)
            out[field] = (field, slice(None))
            offset = 0
            for key, shape in layout.get(layer, []):
                size = layer_width([(key, shape)])
                out[prefix + key] = (field, slice(offset, offset + size))
                offset += size
    return out


def canonical_source(store: EpisodeStore, source: str) -> str:
    """``core.0.h`` -> ``state_out/core.0.h``; hooks and full names unchanged; unknown states refused."""
    if source.startswith(HOOK):
        return source
    name = source if source.startswith((STATE_OUT, STATE_IN)) else STATE_OUT + source
    valid = state_sources(store)
    if name not in valid:
        if not valid:
            raise ProclabError(
                f"episode store {str(store.path)!r} holds no agent state (a feed-forward agent, or "
                f"recorded without states), so there is no {source!r}; analyse a hook point with --hook"
            )
        raise unknown_choice("state", source, valid)
    return name


def default_source(store: EpisodeStore) -> str:
    """The first recorded state tensor leaving each step (``state_out/core.0.h`` for a GRU agent)."""
    names = [n for n in state_sources(store) if n.startswith(STATE_OUT)]
    if not names:
        raise ProclabError(
            f"episode store {str(store.path)!r} holds no agent state (a feed-forward agent, or recorded "
            "without states); name a hook point to replay with --hook (e.g. torso.hook_fc)"
        )
    tensors = [n for n in names if n not in store.fields]
    return (tensors or names)[0]


def step_index(store: EpisodeStore, episodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(episode, step) of every row of a bulk read of ``episodes``."""
    lengths = store.episodes["length"][episodes]
    episode = np.repeat(episodes, lengths)
    ends = np.cumsum(lengths)
    step = np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - lengths, lengths)
    return episode.astype(np.int64), step.astype(np.int64)


def episode_subset(store, steps: int, seed: int) -> np.ndarray:
    """Sorted ids of a seeded random subset of whole episodes holding about ``steps`` steps."""
    if store.num_episodes == 0:
        raise ProclabError(f"episode store {str(store.path)!r} holds no episodes")
    order = np.random.default_rng(seed).permutation(store.num_episodes)
    lengths = np.asarray(store.episodes["length"])[order]
    return np.sort(order[: max(2, int(np.searchsorted(np.cumsum(lengths), steps)) + 1)])


def read_activation(
    store: EpisodeStore,
    source: str,
    episodes: Sequence[int] | None = None,
    *,
    checkpoint: Path | None = None,
    agent=None,
    runtime: Runtime | None = None,
    progress=None,
) -> Activations:
    """Activation ``source`` (a state name or ``hook:NAME``) at every step of ``episodes`` (default all).

    The agent replayed for a hook is ``agent`` (any agent in memory), else ``checkpoint``'s (default: the
    one that recorded the store) on ``runtime``'s device (default: the CPU); ``progress(done, total)`` is
    called as replay advances."""
    idx = np.arange(store.num_episodes) if episodes is None else np.asarray(episodes, np.int64)
    source = canonical_source(store, source)
    episode, step = step_index(store, idx)
    if source.startswith(HOOK):
        hook = source.removeprefix(HOOK)
        replayed = agent if agent is not None else replay_agent(store, hook, checkpoint, runtime)
        x = _replay(store, hook, idx, replayed, progress)
    else:
        field, cols = state_sources(store)[source]
        x = np.ascontiguousarray(store.read_steps(field, idx)[:, cols], dtype=np.float32)
    return Activations(x=x, episode=episode, step=step, source=source)


def replay_agent(
    store: EpisodeStore, hook: str, checkpoint: Path | None = None, runtime: Runtime | None = None
):
    """The agent that replays ``store`` for ``hook`` on ``runtime``'s device (default: the CPU), refused
    (one line) if it lacks the hook point or cannot have produced the store's episodes (actions, games,
    state layout). Replays run in fp32 (no autocast)."""
    agent, env_config, _ = load_agent(
        checkpoint or store.recording_checkpoint(), runtime or make_runtime("cpu", "fp32")
    )
    return check_replay(store, hook, agent, env_config.games())


def check_replay(store: EpisodeStore, hook: str, agent, games=None):
    """``agent``, refused (one line) if it lacks ``hook`` or cannot have produced the store's episodes
    (actions, state layout, and ``games`` when known)."""
    points = agent.hook_points()
    if hook not in points:
        raise unknown_choice("hook point", hook, points)
    store.check_agent(agent.config.num_actions, agent.state_shapes(), games)
    return agent


def replaying(store: EpisodeStore, source: str, agent):
    """The agent that replays activation ``source`` of ``store`` (None for a recorded state): ``agent`` (any
    agent in memory), refused (one line) when missing, lacking the hook or unable to have produced the
    store's episodes."""
    if not source.startswith(HOOK):
        return None
    if agent is None:
        raise ProclabError(f"{source} of {str(store.path)!r} is replayed by an agent: pass agent=")
    env = getattr(agent, "env_config", None)
    return check_replay(store, source.removeprefix(HOOK), agent, env.games() if env is not None else None)


def _replay(store, hook, episodes, agent, progress, batch: int = 16, chunk: int = 256) -> np.ndarray:
    """The hook's activation at every step of ``episodes``, replaying the agent on the stored frames."""
    layout = store.state_layout
    stored_state = bool(layout) and all(STATE_OUT + layer in store.step_fields for layer in layout)
    lengths = store.episodes["length"][episodes]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    out: np.ndarray | None = None
    order = np.argsort(-lengths, kind="stable")  # similar lengths share a batch: little padding
    dev = device_of(agent)
    done = 0
    for lo in range(0, len(order), batch):
        members = order[lo : lo + batch]
        ids = episodes[members]
        lens = lengths[members]
        T, B = int(lens.max()), len(members)
        frames = store.read_steps("obs", ids)
        obs = np.zeros((T, B, *frames.shape[1:]), frames.dtype)
        rows = np.concatenate([np.arange(n) for n in lens])
        cols = np.repeat(np.arange(B), lens)
        obs[rows, cols] = frames
        prev = np.zeros((T, B), np.float32)
        if agent.config.prev_reward and "reward" in store.step_fields:
            reward = store.read_steps("reward", ids).astype(np.float32)
            keep = rows + 1 < lens[cols]
            prev[rows[keep] + 1, cols[keep]] = reward[keep]
        firsts = np.zeros((T, B), bool)
        if stored_state:
            flat = {layer: store.read_episode_field(STATE_IN0 + layer, ids) for layer in layout}
            state = {
                k: torch.as_tensor(v, dtype=torch.float32, device=dev)
                for k, v in unflatten_state(flat, layout).items()
            }
        else:
            state = agent.initial_state(B, device=dev)
            firsts[0] = True
        acts = []
        with torch.inference_mode(), capture(agent, hook, detach=True) as captured:
            for t0 in range(0, T, chunk):
                sl = slice(t0, min(T, t0 + chunk))
                _, state = agent.unroll(
                    torch.as_tensor(obs[sl], device=dev),
                    state,
                    torch.as_tensor(firsts[sl], device=dev),
                    torch.as_tensor(prev[sl], device=dev),
                )
                a = captured[hook]
                acts.append(a.reshape(sl.stop - sl.start, B, -1).float().cpu().numpy())
                captured.calls(hook).clear()
        act = np.concatenate(acts)  # (T, B, D)
        if out is None:
            out = np.empty((int(offsets[-1]), act.shape[-1]), np.float32)
        for j, m in enumerate(members):
            out[offsets[m] : offsets[m + 1]] = act[: lens[j], j]
        done += int(lens.sum())
        if progress is not None:
            progress(done, int(offsets[-1]))
    return out if out is not None else np.zeros((0, 0), np.float32)
