"""Export episodes for other tools: plain ``.npz`` files, or one HDF5 file in Minari's layout.

``export_npz`` writes ``episode_<i>.npz`` per episode, holding every per-step field under
its name (``obs``, ``action``, ``state_in/core.0``, ...; first axis = steps) and every
per-episode value under ``episode/<name>``, plus ``index.json`` (one entry per file and the
timestep convention). NumPy alone reads it back.

``export_minari`` writes Minari's HDF5 layout (``h5py`` needed): a group ``episode_<i>`` per
episode with ``observations`` (``T + 1`` frames), ``actions``, ``rewards`` (raw),
``terminations``, ``truncations``, the other per-step fields under ``infos/`` (``T`` rows)
and per-episode values as attributes; the file's attributes hold ``total_episodes`` and
``total_steps``. Minari wants the observation after the last action, which Procgen never
renders (:mod:`proclab.store.schema`): that frame is all zeros, and every episode group says
so in its ``final_observation`` attribute.

``proclab data export --data DATA --out PATH [--format npz|minari]`` runs either from the shell.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from proclab.errors import ProclabError
from proclab.io.files import replacing, write_json
from proclab.store.store import EpisodeStore

_MINARI = {
    "obs": "observations",
    "action": "actions",
    "reward": "rewards",
    "terminated": "terminations",
    "truncated": "truncations",
}
FINAL_OBSERVATION = "zeros: Procgen never renders the frame after an episode's last action"


def _episode_ids(store: EpisodeStore, episodes: Sequence[int] | None) -> list[int]:
    ids = list(range(store.num_episodes)) if episodes is None else [int(i) for i in episodes]
    if not ids:
        raise ProclabError(f"nothing to export: episode store {str(store.path)!r} has no committed episode")
    bad = [i for i in ids if not 0 <= i < store.num_episodes]
    if bad:
        raise ProclabError(
            f"episode {bad[0]} is not in {str(store.path)!r}: it holds episodes 0..{store.num_episodes - 1}"
        )
    return ids


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def export_npz(
    store: EpisodeStore | str | Path,
    out: str | Path,
    episodes: Sequence[int] | None = None,
    fields: Sequence[str] | None = None,
) -> Path:
    """One ``.npz`` per episode (all fields, or ``fields``) plus ``index.json`` in directory ``out``."""
    store = store if isinstance(store, EpisodeStore) else EpisodeStore(store)
    ids = _episode_ids(store, episodes)
    unknown = sorted(set(fields or ()) - set(store.fields))
    if unknown:
        raise ProclabError(
            f"unknown field(s) {', '.join(unknown)}; {str(store.path)!r} holds {', '.join(store.fields)}"
        )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    index = []
    for i in ids:
        ep = store.episode(i, fields)
        name = f"episode_{i:06d}.npz"
        info = {f"episode/{k}": np.asarray(v) for k, v in ep.info.items()}
        with replacing(out / name, "exported episode") as tmp, open(tmp, "wb") as f:
            np.savez_compressed(f, **ep.steps, **info)
        index.append(
            {"file": name, "episode": i, **{k: _plain(v) for k, v in ep.info.items() if np.ndim(v) == 0}}
        )
    index = {
        "source": str(store.path),
        "episodes": index,
        "timestep_convention": "row t: obs_t, the action taken on it, its reward and terminated/truncated "
        "after it (see proclab.store.schema)",
    }
    write_json(out / "index.json", index, "export index", indent=1)
    return out


def export_minari(
    store: EpisodeStore | str | Path, path: str | Path, episodes: Sequence[int] | None = None
) -> Path:
    """The episodes as one HDF5 file in Minari's ``main_data.hdf5`` layout."""
    store = store if isinstance(store, EpisodeStore) else EpisodeStore(store)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ids = _episode_ids(store, episodes)
    missing = [f for f in _MINARI if f not in store.step_fields]
    if missing:
        raise ProclabError(
            f"Minari needs per-step fields {', '.join(_MINARI)}; episode store {str(store.path)!r} lacks "
            f"{', '.join(missing)}"
        )
    try:
        # lazy: optional (proclab[hdf5]), only the Minari export needs it
        import h5py
    except ImportError:
        raise ProclabError("exporting to Minari's HDF5 layout needs h5py: pip install h5py") from None
    with replacing(path, "Minari export") as tmp, h5py.File(tmp, "w") as f:
        steps = 0
        for n, i in enumerate(ids):
            ep = store.episode(i)
            g = f.create_group(f"episode_{n}")
            g.attrs["id"] = n
            g.attrs["total_steps"] = ep.length
            g.attrs["final_observation"] = FINAL_OBSERVATION
            obs = ep.steps["obs"]
            g.create_dataset(
                "observations", data=np.concatenate([obs, np.zeros_like(obs[:1])]), compression="gzip"
            )
            for field, name in _MINARI.items():
                if field != "obs":
                    g.create_dataset(name, data=ep.steps[field])
            infos = g.create_group("infos")
            for field, values in ep.steps.items():
                if field not in _MINARI:
                    infos.create_dataset(field, data=values)
            for k, v in ep.info.items():
                g.attrs[k] = _plain(v) if np.ndim(v) == 0 else np.asarray(v)
            steps += ep.length
        f.attrs["total_episodes"] = len(ids)
        f.attrs["total_steps"] = steps
        f.attrs["source"] = str(store.path)
    return path
