"""The episode store: recorded (or simulated, or demonstrated) episodes on disk, and readers for them.

API summary (details in each module's docstring; the timestep convention is in :mod:`.schema`)::

    # write: any producer (recorder, world-model samples, T-REX demos) appends finished episodes
    with ShardWriter(path, attrs={...}, commit_seconds=1.0, background=False) as w:
        w.append(steps={"obs": (T,3,64,64) uint8, "action": (T,), ...},   # any per-step fields, first axis T
                 episode={"game": "coinrun", "demo_id": 3, ...})         # scalars, strings, fixed-shape arrays

    # read: the union of every committed shard
    store = EpisodeStore(path, verify=False)
    store.num_episodes, store.num_steps, store.fields   # fields: per-step names incl. derived state_in/<layer>
    store.episodes["return"], ["length"], ["level_seed"], ["game"], ...   # per-episode scalar columns (numpy)
    ep = store.episode(i, fields=None)      # Episode: .steps[name] (T, ...), .info[name], .length, .final_obs
    rows = store.read(i, fields, start, stop)                               # a row range of one episode
    store.info(i), store.recordings(), store.state_layout, store.step_fields, store.episode_fields
    store.check_agent(num_actions, state_shapes, games)                     # ProclabError if they do not match
    unflatten_state(layers, store.state_layout)                             # per-layer vectors -> agent state dict

    # train on windows (proclab.store.windows): dict of (L, ...) tensors per field + mask, first, episode,
    # offset (+ info fields)
    WindowDataset(store_or_path, length, stride=None, fields=None, info=(), episode_starts=False,
                  min_steps=None, episodes=None)

    # export
    export_npz(store, out_dir), export_minari(store, path)

    # the agent's state as one flat vector in the store's layout (the world model's and analyses' view;
    # proclab.store.state_codec)
    codec = StateCodec(shapes); codec.width, codec.layer_slices()

Commands: ``proclab data info`` (:mod:`.info`) and ``proclab data export`` (:mod:`.export`). Recording agents
into a store is :mod:`proclab.record`, a layer above ``rl``; the store itself needs only ``errors`` and ``io``.
Layout on disk and crash safety: :mod:`.writer`. Windows and padding: :mod:`.windows`.

The two torch-facing modules, :mod:`.windows` (a torch ``Dataset``) and :mod:`.state_codec` (tensors), are
imported from their modules, not from here, so that reading a store (``proclab data info``, its ``--help``)
does not load torch.
"""

from proclab.store.formats import export_minari, export_npz
from proclab.store.schema import (
    SCHEMA_VERSION,
    STATE_IN,
    STATE_IN0,
    STATE_OUT,
    STEP_FIELDS,
    flatten_state,
    state_layout,
    unflatten_state,
)
from proclab.store.store import Episode, EpisodeStore
from proclab.store.writer import ShardWriter

__all__ = [
    "SCHEMA_VERSION",
    "STATE_IN",
    "STATE_IN0",
    "STATE_OUT",
    "STEP_FIELDS",
    "Episode",
    "EpisodeStore",
    "ShardWriter",
    "export_minari",
    "export_npz",
    "flatten_state",
    "state_layout",
    "unflatten_state",
]
