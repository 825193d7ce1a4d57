"""What an episode store holds: the timestep convention, the field names, the state layout.

This module is the one place where proclab writes the timestep convention down.

**Timestep convention.** Row ``t`` of an episode (``0 <= t < T``) describes one agent step:

=================  ============================================================================
field              row ``t`` holds
=================  ============================================================================
``obs``            ``obs_t``: the frame the agent saw (uint8 ``(3, 64, 64)``)
``state_in/L``     the agent state *entering* step t (layer ``L``, flattened); derived, see below
``logits_clean``   the clean policy's logits for ``obs_t``
``logits``         the logits the action was sampled from (``logits_clean`` after action noise)
``value``          ``V(obs_t)``
``action``         ``a_t``, sampled from ``logits``
``reward``         the raw reward ``a_t`` earned (CoinRun: 10 for the coin)
``reward_norm``    the same reward normalised as in training (see :mod:`proclab.record.recorder`)
``terminated``     the episode ended after ``a_t`` (level completed or agent died)
``truncated``      the episode was cut after ``a_t`` by Procgen's 1000-step limit
``state_out/L``    the agent state *leaving* step t, i.e. after it processed ``obs_t``
``step``           ``t``, the episode step
``level_seed``     the level of ``obs_t`` (constant within an episode unless levels are sequential)
=================  ============================================================================

So ``reward``/``terminated``/``truncated`` sit on the row of the action that caused them: the
last row of an episode has ``terminated or truncated``, and every other row has neither. (The
interpreting-rl-behavior recorder put them one row later, on a black frame.)

**Agent state.** ``state_in[t] == state_out[t - 1]`` inside an episode, so a store keeps only
``state_out`` per step plus, per episode, ``state_in0``: the state entering its first step,
i.e. the agent's initial state (its reset value; zeros for proclab's cores, not the last state
of the previous episode). Readers derive ``state_in`` from the two, so both exist at every row
at half the storage. A state is flattened *per core layer*: all tensors of layer ``core.<l>``
(``h``, ``c``, fast weights ``F``, ...) are raveled and concatenated into one float vector,
and :data:`STATE_LAYOUT_ATTR` records how to cut it back (:func:`unflatten_state`).

**Final observation.** Procgen resets an environment inside the step that ends its episode:
the observation returned with ``done`` is already the next episode's first frame, and the
frame after the last action is never rendered. It does not exist, so a recording stores none
(``final_obs`` is absent; readers return ``None``). The interpreting-rl-behavior recorder
stored a black frame in its place, which models then learned as if it were real; exporters
that need ``T + 1`` observations (Minari) add an explicit all-zero frame and say so.
A producer that does have final frames (a simulator) may write a per-episode ``final_obs``.

**Per episode** (``episodes/`` arrays): ``start`` and ``length`` (rows in the shard's step
arrays, written by the writer), and what the producer adds. The recorder adds ``game``,
``split``, ``level_seed`` (from the env's ``info["episode"]``, correctly aligned), ``return``
(raw), ``level_complete`` and ``state_in0/<layer>``; with ground truth also ``goal/<name>`` for each goal
of the recorded games (:mod:`proclab.envs.state.goals`: CoinRun's ``coin`` and ``end``, Maze's ``cheese``
and ``corner``; false for the episodes of a game without that goal). Strings are stored as int32 codes into
a per-shard category list.

Dtypes: frames uint8; logits, values, rewards and states float32 (a float16 state would no
longer replay the agent exactly, and for the seeds' agents states are a small share of the
bytes; ``proclab record --state-dtype float16`` halves them for the large fast-weight cores);
actions and level seeds int64, the episode step int32.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

SCHEMA_VERSION = 1
STORE_FORMAT = "proclab-episode-store"
STATE_LAYOUT_ATTR = "state_layout"
GROUND_TRUTH_ATTR = "ground_truth"
"""Shard attribute naming the columns of ``features`` and ``events``: ``{"features": [...], "events": [...]}``."""

STEP_FIELDS = (
    "obs",
    "action",
    "logits",
    "logits_clean",
    "value",
    "reward",
    "reward_norm",
    "terminated",
    "truncated",
    "step",
    "level_seed",
)
"""Per-step fields every recording has (plus ``state_out/<layer>``, ``obs_human`` on request)."""
INDEX_FIELDS = ("start", "length")
"""Per-episode fields the writer adds to every episode."""
STATE_OUT, STATE_IN, STATE_IN0 = "state_out/", "state_in/", "state_in0/"
GOAL = "goal/"
"""Prefix of the per-episode goal fields (``goal/coin``, ``goal/end``, ...)."""

Layout = dict[str, list[tuple[str, tuple[int, ...]]]]
"""Per layer: the state tensors it concatenates, in order, with their per-row shapes."""


def state_layout(shapes: Mapping[str, tuple[int, ...]]) -> Layout:
    """Group an agent's ``state_shapes()`` (``core.<l>.<name>``) by layer ``core.<l>``."""
    layout: Layout = {}
    for key, shape in shapes.items():
        layer = key.rsplit(".", 1)[0]
        layout.setdefault(layer, []).append((key, tuple(int(s) for s in shape)))
    return layout


def layout_from_json(data: Mapping[str, list]) -> Layout:
    return {layer: [(key, tuple(shape)) for key, shape in parts] for layer, parts in data.items()}


def layer_width(parts: list[tuple[str, tuple[int, ...]]]) -> int:
    return sum(int(np.prod(shape)) for _, shape in parts)


def flatten_state(state: Mapping[str, np.ndarray], layout: Layout) -> dict[str, np.ndarray]:
    """Batch-first state tensors -> one ``(B, width)`` array per layer."""
    out = {}
    for layer, parts in layout.items():
        pieces = [np.asarray(state[key]).reshape(len(state[key]), -1) for key, _ in parts]
        out[layer] = pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=1)
    return out


def unflatten_state(layers: Mapping[str, np.ndarray], layout: Layout) -> dict[str, np.ndarray]:
    """Inverse of :func:`flatten_state`: ``(..., width)`` per layer -> ``(..., *shape)`` per tensor."""
    out = {}
    for layer, parts in layout.items():
        flat = np.asarray(layers[layer])
        offset = 0
        for key, shape in parts:
            size = int(np.prod(shape))
            out[key] = flat[..., offset : offset + size].reshape(*flat.shape[:-1], *shape)
            offset += size
    return out


INITIAL_STATE = "initial_state"
"""The store's per-episode blob holding the game's first state (written by ``proclab record``)."""


def has_first_states(store) -> bool:
    """Whether ``store`` (an :class:`~proclab.store.store.EpisodeStore`) holds its episodes' first game
    states (recorded with ground truth)."""
    return INITIAL_STATE in store.blob_fields
