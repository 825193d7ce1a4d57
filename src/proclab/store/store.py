"""Reading a store: the union of its committed shards, episode by episode or row range by row range.

:class:`EpisodeStore` opens every shard that has a commit record, checks it (schema version,
fields, arrays at least as long as the record says; with ``verify=True`` also that every
chunk of the committed rows exists on disk, since zarr silently reads a missing chunk as
zeros), and numbers the episodes of all shards in shard-name order. Shards without a commit
record belong to writers that died before their first commit (or are still starting); they
hold no complete episode and are skipped (``uncommitted_shards`` names them).

Per-episode scalars of every shard are loaded into :attr:`EpisodeStore.episodes` at open
(a few bytes per episode); steps are read on demand. ``state_in/<layer>`` is derived from
``state_out/<layer>`` and the episode's ``state_in0/<layer>`` (see :mod:`proclab.store.schema`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.core.sync import sync
from zarr.storage import LocalStore

from proclab.errors import ProclabError
from proclab.store.schema import (
    INDEX_FIELDS,
    STATE_IN,
    STATE_IN0,
    STATE_LAYOUT_ATTR,
    STATE_OUT,
    Layout,
    layout_from_json,
    state_layout,
)
from proclab.store.writer import BLOB_OFFSET, BLOB_SIZE, COMMIT, ROOT_ATTR, check_root, check_version


@dataclass(frozen=True)
class Episode:
    """One episode: per-step arrays (``steps[name]``, first axis ``T``) and per-episode values."""

    index: int
    steps: dict[str, np.ndarray]
    info: dict[str, Any]

    @property
    def length(self) -> int:
        return int(self.info["length"])

    @property
    def final_obs(self) -> np.ndarray | None:
        """The frame after the last action, if the producer had one (Procgen recordings do not)."""
        return self.info.get("final_obs")

    def __getitem__(self, name: str):
        return self.steps[name] if name in self.steps else self.info[name]


@dataclass(frozen=True)
class Shard:
    name: str
    episodes: int
    steps: int
    attrs: dict
    record: dict


class EpisodeStore:
    """All committed episodes of the store at ``path``, read-only."""

    def __init__(self, path: str | Path, *, verify: bool = False):
        self.path = Path(path)
        self.attrs = check_root(self.path)
        self._zstore = LocalStore(self.path, read_only=True)
        self.shards: list[Shard] = []
        self.uncommitted_shards: list[str] = []
        self._uncommitted_attrs: dict[str, dict] = {}
        self._groups: list[zarr.Group] = []
        for d in sorted(p for p in self.path.iterdir() if (p / "zarr.json").is_file()):
            if (d / COMMIT).is_file():
                self._open_shard(d, verify)
            else:
                self.uncommitted_shards.append(d.name)
                try:  # a writer that is starting (or died starting) may not have written its attributes
                    self._uncommitted_attrs[d.name] = _read_attrs(d)
                except (OSError, ValueError):
                    self._uncommitted_attrs[d.name] = {}
        self._check_same_fields()
        self._build_table()
        self._arrays: dict[tuple[int, str], zarr.Array] = {}

    # -- opening ---------------------------------------------------------------------------------
    def _open_shard(self, d: Path, verify: bool) -> None:
        where = f"shard {d.name!r} of {str(self.path)!r}"
        try:
            record = json.loads((d / COMMIT).read_text())
            attrs = _read_attrs(d)
        except (OSError, ValueError) as err:
            raise ProclabError(
                f"{where} is half-written: unreadable commit record or metadata ({err})"
            ) from None
        check_version(record.get("schema_version"), where)
        check_version((attrs.get(ROOT_ATTR) or {}).get("schema_version"), where)
        try:
            group = zarr.open_group(store=self._zstore, path=d.name, mode="r")
            counts = {"steps": int(record["steps"]), "episodes": int(record["episodes"])}
            counts |= {f"blobs/{k}": int(n) for k, n in record.get("blob_bytes", {}).items()}
            names = [f"episodes/{k}" for k in (*INDEX_FIELDS, *_blob_index(record))]
            names += [f"{g}/{k}" for g in ("steps", "episodes", "blobs") for k in record["fields"].get(g, {})]
            for name in names:
                arr = group[name]
                need = counts.get(name, counts.get(name.split("/", 1)[0], 0))
                if arr.shape[0] < need:
                    raise ProclabError(
                        f"{where} is half-written: {name} has {arr.shape[0]} rows but the commit record "
                        f"says {need}; delete the shard or re-copy it"
                    )
                if verify:
                    _check_chunks(d / name, arr, need, where)
        except (KeyError, ValueError, FileNotFoundError) as err:
            raise ProclabError(f"{where} is half-written: {err!r} is missing or unreadable") from None
        self.shards.append(Shard(d.name, counts["episodes"], counts["steps"], attrs, record))
        self._groups.append(group)

    def _check_same_fields(self) -> None:
        if not self.shards:
            return
        first = self.shards[0]
        for shard in self.shards[1:]:
            if shard.record["fields"] != first.record["fields"]:
                raise ProclabError(
                    f"shards {first.name!r} and {shard.name!r} of {str(self.path)!r} hold different fields; "
                    "a store must hold one kind of episode (write the other kind into its own store)"
                )

    def _build_table(self) -> None:
        """Per-episode scalars of all shards, concatenated; strings decoded from their codes."""
        columns: dict[str, list[np.ndarray]] = {"shard": [], "row": []}
        scalar = [k for k, v in self.episode_fields.items() if not v["shape"]]
        for s, (shard, group) in enumerate(zip(self.shards, self._groups, strict=True)):
            n = shard.episodes
            columns["shard"].append(np.full(n, s, np.int64))
            columns["row"].append(np.arange(n, dtype=np.int64))
            cats = shard.record.get("categories", {})
            for k in (*INDEX_FIELDS, *_blob_index(shard.record), *scalar):
                (values,) = self._read_many([(group[f"episodes/{k}"], slice(0, n))], shard.name)
                if k in cats:
                    values = np.asarray(cats[k], dtype=object)[values]
                columns.setdefault(k, []).append(values)
        self.episodes: dict[str, np.ndarray] = {
            k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in columns.items()
        }

    # -- what the store holds --------------------------------------------------------------------
    @property
    def num_episodes(self) -> int:
        return sum(s.episodes for s in self.shards)

    @property
    def num_steps(self) -> int:
        return sum(s.steps for s in self.shards)

    def __len__(self) -> int:
        return self.num_episodes

    @property
    def step_fields(self) -> dict[str, dict]:
        """Stored per-step fields: name -> ``{"dtype", "shape"}`` (shape per row)."""
        return dict(self.shards[0].record["fields"]["steps"]) if self.shards else {}

    @property
    def episode_fields(self) -> dict[str, dict]:
        """Per-episode fields besides ``start``/``length``: name -> ``{"dtype", "shape"}``."""
        return dict(self.shards[0].record["fields"]["episodes"]) if self.shards else {}

    @property
    def blob_fields(self) -> list[str]:
        """Per-episode byte strings (:meth:`read_blob`), e.g. ``initial_state``: the game's first state."""
        return list(self.shards[0].record["fields"].get("blobs", {})) if self.shards else []

    @property
    def fields(self) -> list[str]:
        """Every per-step name :meth:`read` accepts: stored fields plus the derived ``state_in/*``."""
        names = list(self.step_fields)
        names += [STATE_IN + k.removeprefix(STATE_OUT) for k in names if k.startswith(STATE_OUT)]
        return names

    @property
    def state_layout(self) -> Layout:
        """How each ``state_*/<layer>`` vector splits into the agent's state tensors."""
        for shard in self.shards:
            if STATE_LAYOUT_ATTR in shard.attrs:
                return layout_from_json(shard.attrs[STATE_LAYOUT_ATTR])
        return {}

    @property
    def games(self) -> list[str]:
        return sorted(set(self.episodes.get("game", [])))

    def check_agent(
        self, num_actions: int, state_shapes: dict[str, tuple[int, ...]], games: Sequence[str] | None = None
    ) -> None:
        """Refuse an agent that cannot have produced (or cannot consume) these episodes."""
        where = f"episode store {str(self.path)!r}"
        logits = self.step_fields.get("logits")
        if logits is not None and logits["shape"] != [num_actions]:
            raise ProclabError(
                f"{where} has {logits['shape'][0]} policy logits per step; the agent has {num_actions}"
            )
        if games is not None and set(self.games) - set(games):
            raise ProclabError(
                f"{where} holds episodes of {', '.join(self.games)}; the agent plays {', '.join(games)}"
            )
        theirs = {k: [list(s) for _, s in v] for k, v in self.state_layout.items()}
        ours = {k: [list(s) for _, s in v] for k, v in state_layout(state_shapes).items()}
        if any(k.startswith(STATE_OUT) for k in self.step_fields) and theirs != ours:
            raise ProclabError(f"{where} holds agent states of layout {theirs}; the agent's is {ours}")

    # -- reading ---------------------------------------------------------------------------------
    def _array(self, shard: int, name: str) -> zarr.Array:
        key = (shard, name)
        if key not in self._arrays:
            self._arrays[key] = self._groups[shard][name]
        return self._arrays[key]

    def _read_many(
        self, requests: list[tuple[zarr.Array, slice]], opening: str | None = None
    ) -> list[np.ndarray]:
        """Read several array slices concurrently on zarr's I/O loop; a damaged chunk among them is a
        one-line error naming it and the episodes it holds (``opening``: the shard being opened)."""
        try:
            return sync(_gather(requests))
        except (ValueError, RuntimeError, OSError) as err:  # a checksum mismatch, an undecodable chunk
            for arr, rows in requests:
                shard = opening or arr.path.split("/", 1)[0]
                for damage in self._damaged(arr, rows, shard):
                    raise ProclabError(
                        f"episode store {str(self.path)!r} is damaged: {describe_damage(damage)} ({err}); "
                        "`proclab data info --verify` lists every damaged chunk"
                    ) from None
            raise

    def _damaged(self, arr: zarr.Array, rows: slice, shard: str) -> list[dict]:
        """The chunks of ``arr`` overlapping ``rows`` that cannot be read back, with their episodes."""
        per = arr.chunks[0]
        stop = min(rows.stop if rows.stop is not None else arr.shape[0], arr.shape[0])
        found = []
        for c in range((rows.start or 0) // per, (stop + per - 1) // per):
            first, end = c * per, min((c + 1) * per, arr.shape[0])
            try:
                arr[first:end]
            except (ValueError, RuntimeError, OSError) as err:
                field = arr.path.split("/", 1)[1]
                episodes = self._episodes_in(shard, field, first, end)
                found.append(
                    {
                        "shard": shard,
                        "field": field,
                        "chunk": c,
                        "rows": [first, end],
                        "episodes": episodes,
                        "error": str(err),
                    }
                )
        return found

    def _episodes_in(self, shard: str, field: str, first: int, end: int) -> list[int]:
        """Store-wide indices of the committed episodes of ``shard`` with rows in ``[first, end)`` of ``field``."""
        if not hasattr(self, "episodes") or shard not in [s.name for s in self.shards]:
            return []  # the damage is in the index being read at opening
        e = self.episodes
        mine = np.flatnonzero(e["shard"] == [s.name for s in self.shards].index(shard))
        if field.startswith("episodes/"):
            hit = (e["row"][mine] >= first) & (e["row"][mine] < end)
        elif field.startswith("blobs/"):
            name = field.removeprefix("blobs/")
            offset, size = e[name + BLOB_OFFSET][mine], e[name + BLOB_SIZE][mine]
            hit = (offset < end) & (offset + size > first)
        else:
            hit = (e["start"][mine] < end) & (e["start"][mine] + e["length"][mine] > first)
        return mine[hit].tolist()

    def verify(self) -> list[dict]:
        """Every chunk of every committed row that cannot be read back (a flipped byte fails its checksum
        in stores written with one): shard, field, chunk, rows and the episodes it holds."""
        found = []
        for shard, group in zip(self.shards, self._groups, strict=True):
            index = (*INDEX_FIELDS, *_blob_index(shard.record))
            fields = {
                "steps": shard.record["fields"]["steps"],
                "episodes": {**dict.fromkeys(index), **shard.record["fields"]["episodes"]},
                "blobs": shard.record["fields"].get("blobs", {}),
            }
            counts = {"steps": shard.steps, "episodes": shard.episodes}
            for kind, names in fields.items():
                for name in names:
                    rows = (
                        shard.record.get("blob_bytes", {}).get(name, 0) if kind == "blobs" else counts[kind]
                    )
                    found += self._damaged(group[f"{kind}/{name}"], slice(0, rows), shard.name)
        return found

    def _locate(self, index: int) -> tuple[int, int, int, int]:
        """(shard, row in shard, first step row, length) of episode ``index``."""
        n = self.num_episodes
        if not -n <= index < n:
            raise IndexError(f"episode {index} out of range for a store of {n} episodes")
        e = self.episodes
        return int(e["shard"][index]), int(e["row"][index]), int(e["start"][index]), int(e["length"][index])

    def read(
        self, index: int, fields: Sequence[str] | None = None, start: int = 0, stop: int | None = None
    ) -> dict[str, np.ndarray]:
        """Rows ``[start, stop)`` of episode ``index`` (default: all of it) for the given fields.

        All fields are fetched concurrently (one round trip to zarr's I/O loop per call).
        """
        shard, row, first, length = self._locate(index)
        stop = length if stop is None else min(stop, length)
        if not 0 <= start < stop:
            raise IndexError(f"rows [{start}, {stop}) are not inside episode {index} of length {length}")
        requests: dict[tuple[str, str], tuple[zarr.Array, slice]] = {}
        for name in self.fields if fields is None else fields:
            if name.startswith(STATE_IN):  # state_in[t] = state_out[t - 1], state_in0 at the first step
                layer = name.removeprefix(STATE_IN)
                rows = slice(first + max(start - 1, 0), first + stop - 1)
                requests[name, "out"] = (self._array(shard, "steps/" + STATE_OUT + layer), rows)
                if start == 0:
                    requests[name, "in0"] = (
                        self._array(shard, "episodes/" + STATE_IN0 + layer),
                        slice(row, row + 1),
                    )
            elif name in self.step_fields:
                requests[name, ""] = (self._array(shard, "steps/" + name), slice(first + start, first + stop))
            else:
                raise KeyError(f"no per-step field {name!r}; the store has {', '.join(self.fields)}")
        got = dict(zip(requests, self._read_many(list(requests.values())), strict=True))
        out = {}
        for name, part in requests:
            if part == "":
                out[name] = got[name, part]
            elif part == "out":
                init = got.get((name, "in0"))
                prev = got[name, part]
                out[name] = prev if init is None else np.concatenate([init.astype(prev.dtype), prev])
        return out

    # -- bulk reads -------------------------------------------------------------------------------
    def _select(self, episodes: Sequence[int] | None) -> np.ndarray:
        n = self.num_episodes
        idx = np.arange(n) if episodes is None else np.asarray(episodes, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"episode indices must be in [-{n}, {n}) for a store of {n} episodes")
        return np.where(idx < 0, idx + n, idx)

    def read_steps(self, name: str, episodes: Sequence[int] | None = None) -> np.ndarray:
        """One per-step field (``state_in/*`` included) of many episodes, concatenated in the given
        order (default: all episodes). One request per shard, covering the rows from its first to its
        last selected episode, all shards concurrently; equal to concatenating :meth:`read` results."""
        idx = self._select(episodes)
        derived = name.startswith(STATE_IN)
        stored = STATE_OUT + name.removeprefix(STATE_IN) if derived else name
        if stored not in self.step_fields:
            raise KeyError(f"no per-step field {name!r}; the store has {', '.join(self.fields)}")
        e = self.episodes
        shard, row, start, length = (e[k][idx] for k in ("shard", "row", "start", "length"))
        spans = {
            int(s): (int(start[shard == s].min()), int((start + length)[shard == s].max()))
            for s in np.unique(shard)
        }
        requests = [(self._array(s, "steps/" + stored), slice(*span)) for s, span in spans.items()]
        if derived:
            rows = {s: (int(row[shard == s].min()), int(row[shard == s].max()) + 1) for s in spans}
            requests += [
                (self._array(s, "episodes/" + STATE_IN0 + name.removeprefix(STATE_IN)), slice(*rows[s]))
                for s in spans
            ]
        got = self._read_many(requests)
        blocks, first_rows = (
            dict(zip(spans, got, strict=False)),
            dict(zip(spans, got[len(spans) :], strict=False)),
        )
        spec = self.step_fields[stored]
        out = np.empty((int(length.sum()), *spec["shape"]), dtype=spec["dtype"])
        ends = np.cumsum(length)
        begins = ends - length
        for s, block in blocks.items():
            sel = np.flatnonzero(shard == s)
            # destination rows in `out` and source rows in the shard's block, for every selected step
            dest = np.concatenate([np.arange(begins[i], ends[i]) for i in sel])
            src = np.concatenate([np.arange(start[i], start[i] + length[i]) for i in sel]) - spans[s][0]
            if not derived:
                out[dest] = block[src]
                continue
            first = np.isin(dest, begins[sel])  # state_in[t] = state_out[t - 1]; state_in0 at t = 0
            out[dest[~first]] = block[src[~first] - 1]
            out[begins[sel]] = first_rows[s][row[sel] - rows[s][0]]
        return out

    def read_episode_field(self, name: str, episodes: Sequence[int] | None = None) -> np.ndarray:
        """One per-episode field (e.g. ``bottleneck``, ``state_in0/*``) of many episodes, ``(E, ...)``
        in the given order (default: all). One request per shard."""
        idx = self._select(episodes)
        if name in self.episodes:
            return self.episodes[name][idx]
        if name not in self.episode_fields:
            valid = sorted({*self.episode_fields, *self.episodes} - {"shard", "row"})
            raise KeyError(f"no per-episode field {name!r}; the store has {', '.join(valid)}")
        e = self.episodes
        shard, row = e["shard"][idx], e["row"][idx]
        spans = {
            int(s): (int(row[shard == s].min()), int(row[shard == s].max()) + 1) for s in np.unique(shard)
        }
        got = self._read_many(
            [(self._array(s, "episodes/" + name), slice(*span)) for s, span in spans.items()]
        )
        spec = self.episode_fields[name]
        out = np.empty((len(idx), *spec["shape"]), dtype=spec["dtype"])
        for (s, span), block in zip(spans.items(), got, strict=True):
            sel = shard == s
            out[sel] = block[row[sel] - span[0]]
        return out

    def read_blob(self, name: str, index: int) -> bytes:
        """Episode ``index``'s byte string ``name`` (see :attr:`blob_fields`)."""
        if name not in self.blob_fields:
            have = ", ".join(self.blob_fields) or "none"
            raise ProclabError(
                f"episode store {str(self.path)!r} holds no per-episode {name!r} (it has: {have})"
            )
        shard, _, _, _ = self._locate(index)
        offset, size = (
            int(self.episodes[name + BLOB_OFFSET][index]),
            int(self.episodes[name + BLOB_SIZE][index]),
        )
        (data,) = self._read_many([(self._array(shard, "blobs/" + name), slice(offset, offset + size))])
        return data.tobytes()

    def info(self, index: int) -> dict[str, Any]:
        """Per-episode values of episode ``index``, including array-valued ones (``state_in0/*``)."""
        shard, row, _, _ = self._locate(index)
        out = {k: v[index] for k, v in self.episodes.items()}
        cats = self.shards[shard].record.get("categories", {})
        for k, spec in self.shards[shard].record["fields"]["episodes"].items():
            if spec["shape"]:
                (out[k],) = self._read_many([(self._array(shard, "episodes/" + k), slice(row, row + 1))])[0]
            elif k not in cats:
                out[k] = out[k].item()
        return out

    def episode(self, index: int, fields: Sequence[str] | None = None) -> Episode:
        """Episode ``index`` with the given per-step fields (default: all, ``state_in/*`` included)."""
        index = range(self.num_episodes)[index]
        return Episode(index, self.read(index, fields), self.info(index))

    def __iter__(self) -> Iterator[Episode]:
        for i in range(self.num_episodes):
            yield self.episode(i)

    def recordings(self) -> dict[str, dict]:
        """The ``proclab record`` runs that wrote this store, by id: their settings (the ``recording``
        attribute of their shards), ``committed`` episodes and ``shards`` (committed or not)."""
        out: dict[str, dict] = {}
        attrs = {s.name: (s.attrs, s.episodes) for s in self.shards}
        attrs |= {name: (a, 0) for name, a in self._uncommitted_attrs.items()}
        for name in sorted(attrs):
            shard_attrs, episodes = attrs[name]
            rec = shard_attrs.get("recording")
            if rec is not None:
                entry = out.setdefault(rec["id"], {"recording": rec, "committed": 0, "shards": []})
                entry["committed"] += episodes
                entry["shards"].append(name)
        return out

    def recording_checkpoints(self) -> list[Path]:
        """The checkpoints whose agents ``proclab record`` ran into this store, each once, in recording order
        (none for stores that other producers wrote: T-REX demos, world-model samples)."""
        found = [entry["recording"]["checkpoint"] for entry in self.recordings().values()]
        return [Path(c) for c in dict.fromkeys(found)]

    def recording_checkpoint(self) -> Path:
        """The checkpoint whose agent recorded this store (its first recording's)."""
        found = self.recording_checkpoints()
        if not found:
            raise ProclabError(
                f"episode store {str(self.path)!r} was not written by proclab record, so its agent is unknown; "
                "name it with --checkpoint"
            )
        return found[0]

    def size_on_disk(self) -> int:
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())

    def __repr__(self) -> str:
        return f"EpisodeStore({str(self.path)!r}, shards={len(self.shards)}, episodes={self.num_episodes}, steps={self.num_steps})"


def _blob_index(record: dict) -> list[str]:
    """The per-episode columns that locate each blob of a shard (none in stores written before blobs)."""
    return [name + end for name in record["fields"].get("blobs", {}) for end in (BLOB_OFFSET, BLOB_SIZE)]


async def _gather(requests: list[tuple[zarr.Array, slice]]) -> list[np.ndarray]:
    return await asyncio.gather(*(arr.async_array.getitem(rows) for arr, rows in requests))


def _read_attrs(shard_dir: Path) -> dict:
    return json.loads((shard_dir / "zarr.json").read_text()).get("attributes", {})


def describe_damage(damage: dict) -> str:
    """``shard 'shard-00000' steps/obs chunk 3 (rows 384-511, episodes 4, 5)``."""
    first, end = damage["rows"]
    episodes = damage["episodes"]
    held = f"episodes {', '.join(map(str, episodes))}" if episodes else "the shard's episode index"
    return f"shard {damage['shard']!r} {damage['field']} chunk {damage['chunk']} (rows {first}-{end - 1}, {held})"


def _check_chunks(array_dir: Path, arr: zarr.Array, rows: int, where: str) -> None:
    """Every chunk holding committed rows must exist (zarr would read a missing one as zeros)."""
    per = arr.chunks[0]
    rest = "/".join("0" for _ in arr.shape[1:])
    for c in range((rows + per - 1) // per):
        key = array_dir / "c" / (f"{c}/{rest}" if rest else f"{c}")
        if not key.is_file():
            raise ProclabError(
                f"{where} is half-written: chunk {c} of {array_dir.name} (rows {c * per}+) is missing"
            )
