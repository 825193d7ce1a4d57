"""Writing episodes: the store's layout, its commit protocol, chunking and compression.

A store is a directory (a zarr v3 hierarchy)::

    DATA/
      zarr.json               root group; attributes: format and schema version
      shard-00000/            one group per writer (a recorder process, a Ray task, a T-REX job)
        zarr.json             attributes: schema version and the producer's config (e.g. the recording)
        steps/<field>         per-step arrays, episodes concatenated along axis 0
        episodes/<field>      per-episode arrays: start, length, and the producer's columns
        blobs/<name>          per-episode byte strings (e.g. the game's initial state), concatenated;
                              episode i's are bytes [<name>/offset, + <name>/size) of episodes/
        commit.json           the commit record
      videos/                 optional mp4s (proclab record --videos)

**Commit protocol.** A writer buffers finished episodes in memory and commits them in
batches: it grows its arrays, writes the new rows, and only then replaces ``commit.json``,
which says how many episodes and steps of the shard are complete (plus the field schema and
the category lists of string columns). Readers trust only what a commit record covers. Every
file proclab writes (chunks, array metadata, the commit record) goes to a temporary name and
is renamed over the old one by :class:`ReplacingStore`, whatever zarr's own store does, so at
any instant each file is either its old or its new version; both hold every committed row.
A writer killed at any point (even ``kill -9``) thus leaves all committed episodes readable;
rows past the commit are ignored and ``proclab record --resume`` writes new shards instead
of appending to old ones. The guarantee covers the death of the process, not of the machine
(nothing is fsync'ed). Episodes are committed every ``commit_seconds`` (and on close).

**Several writers.** Each writer creates its own shard (``os.mkdir`` picks a free name
atomically, also on a shared file system), so any number of processes or machines may write
one store at once; readers see the union of committed shards, ordered by shard name.

**Chunks and compression.** Axis 0 is chunked at about 2 MiB of raw data (128 frames for
``obs``, 4096 rows for scalars), so a window of a few dozen steps decodes one or two chunks
and an episode a handful. Frames use zstd level 3: consecutive Procgen frames share most of
their pixels and zstd's window spans several frames, so a 64x64 frame takes about 1.1 KB
instead of 12.3 KB (docs/recording.md has the measured numbers). Numbers use Blosc-zstd with
byte shuffling, which groups the similar high bytes of floats and ints.

**Checksums.** Every compressed chunk ends with its CRC32C (zarr's ``crc32c`` codec, 4 bytes a
chunk), so a byte flipped on disk is a one-line error naming the shard, the field, the chunk
and the episodes it holds, instead of silently wrong numbers (``proclab data info --verify``
checks every chunk). Stores written before the checksum carry their codecs in their array
metadata and stay readable as they are.

**A full disk** during a commit removes the file being written and stops the writer with one
line (:mod:`proclab.io.files`); the commit record still describes the last complete commit,
so every episode committed before stays readable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec, ZstdCodec
from zarr.core.sync import sync
from zarr.storage import LocalStore

from proclab.errors import ProclabError
from proclab.io.files import write_bytes, write_json
from proclab.store.schema import INDEX_FIELDS, SCHEMA_VERSION, STORE_FORMAT

COMMIT = "commit.json"
ROOT_ATTR = "proclab"
CHUNK_BYTES = 2 << 20
MAX_CHUNK_ROWS = 4096
BLOB_CHUNK = 1 << 20  # bytes per chunk of a blob array (one game state is 10-40 kB before compression)
BLOB_OFFSET, BLOB_SIZE = "/offset", "/size"


# -- files -------------------------------------------------------------------------------------
class ReplacingStore(LocalStore):
    """A zarr ``LocalStore`` whose every write replaces the file by rename (never in place)."""

    async def set(self, key: str, value) -> None:
        await self._ensure_open()
        self._check_writable()
        await asyncio.to_thread(write_bytes, self.root / key, value.as_buffer_like(), "episode store file")


def chunk_rows(row_bytes: int) -> int:
    """Rows per chunk along axis 0: the largest power of two within :data:`CHUNK_BYTES` (max 4096)."""
    rows = 1
    while rows * 2 <= MAX_CHUNK_ROWS and rows * 2 * max(row_bytes, 1) <= CHUNK_BYTES:
        rows *= 2
    return rows


def compressors_for(dtype: np.dtype) -> tuple:
    """The compressor of a field, then a CRC32C checksum of every compressed chunk (see the module doc)."""
    if dtype.itemsize == 1:  # frames, bools: no bytes to shuffle
        return ZstdCodec(level=3), Crc32cCodec()
    return BloscCodec(cname="zstd", clevel=3, shuffle="shuffle", typesize=dtype.itemsize), Crc32cCodec()


# -- the store root ----------------------------------------------------------------------------
def root_attrs() -> dict:
    return {ROOT_ATTR: {"format": STORE_FORMAT, "schema_version": SCHEMA_VERSION}}


def check_root(path: Path) -> dict:
    """The root attributes of the store at ``path``, after checking it is one this proclab reads."""
    meta = path / "zarr.json"
    if not path.exists():
        raise ProclabError(f"episode store {str(path)!r} does not exist")
    try:
        attrs = json.loads(meta.read_text()).get("attributes", {})
    except FileNotFoundError:
        raise ProclabError(f"{str(path)!r} is not an episode store (no zarr.json)") from None
    except (OSError, ValueError) as err:
        raise ProclabError(f"episode store {str(path)!r} has an unreadable zarr.json: {err}") from None
    info = attrs.get(ROOT_ATTR) or {}
    if info.get("format") != STORE_FORMAT:
        raise ProclabError(f"{str(path)!r} is a zarr store but not a proclab episode store")
    check_version(info.get("schema_version"), f"episode store {str(path)!r}")
    return attrs


def check_version(version: Any, what: str) -> None:
    if version != SCHEMA_VERSION:
        raise ProclabError(
            f"{what} has schema version {version!r}; this proclab reads version {SCHEMA_VERSION}"
            + ("; upgrade proclab" if isinstance(version, int) and version > SCHEMA_VERSION else "")
        )


def ensure_store(path: str | Path) -> Path:
    """Create an empty store at ``path`` unless one is there (checked); returns the path.

    Safe when several writers start at once: a directory holding nothing but hidden temporary
    files is one whose root metadata another writer is creating.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ProclabError(
            f"{str(path)!r} is a file, not an episode store (a directory); choose another path"
        )
    path.mkdir(parents=True, exist_ok=True)
    meta = path / "zarr.json"
    if not meta.is_file():
        visible = any(not p.name.startswith(".") for p in path.iterdir())
        # Writers publish zarr.json (by an atomic rename) before they claim a shard, so a
        # visible entry next to a zarr.json that appeared meanwhile is another writer's shard.
        if visible and not meta.is_file():
            raise ProclabError(f"{str(path)!r} exists and is not an episode store; choose another path")
        with contextlib.suppress(zarr.errors.ContainsGroupError):  # another writer made it meanwhile
            zarr.open_group(store=ReplacingStore(path), mode="a", attributes=root_attrs())
    check_root(path)
    return path


def _new_shard_dir(store: Path, name: str | None) -> str:
    if name is not None:
        try:
            (store / name).mkdir()
        except FileExistsError:
            raise ProclabError(
                f"shard {name!r} already exists in {str(store)!r}; pick another name"
            ) from None
        return name
    n = 0
    while True:
        candidate = f"shard-{n:05d}"
        try:
            (store / candidate).mkdir()
            return candidate
        except FileExistsError:
            n += 1


# -- the writer --------------------------------------------------------------------------------
class ShardWriter:
    """Appends finished episodes to a new shard of a store (created if missing).

    ``append(steps, episode)`` takes one episode: ``steps`` maps field names to arrays whose
    first axis is the episode's ``T`` steps, ``episode`` maps per-episode names to scalars,
    strings (stored as category codes), fixed-shape arrays, or ``bytes`` of any length (a *blob*:
    stored in ``blobs/<name>``, located by the per-episode columns ``<name>/offset`` and
    ``<name>/size``; read back with :meth:`EpisodeStore.read_blob`). Field names may contain ``/``
    (``state_out/core.0``). The first episode fixes the schema; later ones must match it.

    Commits happen every ``commit_seconds`` (checked on ``append`` and :meth:`maybe_commit`)
    and on :meth:`close`. With ``background=True`` they run in a writer thread, so compression
    overlaps with the producer (one commit in flight at a time; errors surface on the next
    call). ``on_commit(episodes, steps)`` is called after each commit with the shard's totals.
    """

    def __init__(
        self,
        store: str | Path,
        name: str | None = None,
        *,
        attrs: Mapping[str, Any] | None = None,
        commit_seconds: float = 1.0,
        background: bool = False,
        on_commit: Callable[[int, int], None] | None = None,
    ):
        self.store = ensure_store(store)
        self.name = _new_shard_dir(self.store, name)
        self.path = self.store / self.name
        self.commit_seconds = commit_seconds
        self.on_commit = on_commit
        shard_attrs = {
            ROOT_ATTR: {"format": STORE_FORMAT, "schema_version": SCHEMA_VERSION, "shard": self.name}
        }
        self._group = zarr.open_group(
            store=ReplacingStore(self.store),
            path=self.name,
            mode="w-",  # "w" would delete the directory, and with it our claim on the name
            attributes={**shard_attrs, **(attrs or {})},
        )
        self._schema: dict[str, dict[str, tuple[np.dtype, tuple[int, ...]]]] | None = None
        self._categories: dict[str, list[str]] = {}
        self._arrays: dict[str, zarr.Array] = {}
        self._buffer: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, bytes]]] = []
        self.blob_bytes: dict[str, int] = {}  # committed bytes of each blob array
        self.appended = 0
        self.episodes = self.steps = self.commits = 0  # committed totals (those in commit.json)
        self._last_commit = time.monotonic()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="shard-writer") if background else None
        self._pending: Future | None = None

    # -- producing -------------------------------------------------------------------------------
    def append(self, steps: Mapping[str, Any], episode: Mapping[str, Any] | None = None) -> int:
        """Buffer one finished episode; returns its index within this shard."""
        rows, info, blobs = self._validate(steps, episode or {})
        self._buffer.append((rows, info, blobs))
        self.appended += 1
        self.maybe_commit()
        return self.appended - 1

    def maybe_commit(self) -> None:
        """Commit if episodes are waiting and ``commit_seconds`` have passed since the last commit
        (in background mode: and the previous commit is done, so the producer never waits)."""
        if not self._buffer or time.monotonic() - self._last_commit < self.commit_seconds:
            return
        if self._pending is not None and not self._pending.done():
            return
        self.commit()

    def commit(self) -> None:
        """Write every buffered episode and publish it (in the background thread if enabled)."""
        self._last_commit = time.monotonic()
        if not self._buffer:
            return
        batch, self._buffer = self._buffer, []
        if self._pool is None:
            self._write(batch)
            return
        self._wait()
        self._pending = self._pool.submit(self._write, batch)

    def close(self) -> None:
        """Commit what is buffered and wait until it is on disk."""
        try:
            self.commit()
            self._wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    # -- validation ------------------------------------------------------------------------------
    def _validate(self, steps: Mapping[str, Any], episode: Mapping[str, Any]):
        rows = {k: np.array(v) for k, v in steps.items()}  # copies: the caller may reuse its buffers
        if not rows:
            raise ValueError("an episode needs at least one per-step field")
        lengths = {k: (v.shape[0] if v.ndim else None) for k, v in rows.items()}
        T = next(iter(lengths.values()))
        if T is None or T < 1 or any(n != T for n in lengths.values()):
            raise ValueError(f"per-step fields must share a first axis of length >= 1, got {lengths}")
        reserved = set(INDEX_FIELDS) & set(episode)
        if reserved:
            raise ValueError(f"per-episode names {sorted(reserved)} are reserved for the writer")
        info, blobs = {}, {}
        for k, v in episode.items():
            if isinstance(v, bytes | bytearray | memoryview):
                blobs[k] = bytes(v)
                continue
            if isinstance(v, str):
                cats = self._categories.setdefault(k, [])
                if v not in cats:
                    cats.append(v)
                v = np.int32(cats.index(v))
            info[k] = np.array(v)
        for k, v in (*rows.items(), *info.items()):
            if v.dtype.kind not in "biuf":
                raise ValueError(f"field {k!r} has dtype {v.dtype}; use numbers, booleans or strings")
        schema = {
            "steps": {k: (v.dtype, v.shape[1:]) for k, v in rows.items()},
            "episodes": {k: (v.dtype, v.shape) for k, v in info.items()},
            "blobs": {k: (np.dtype(np.uint8), ()) for k in blobs},
        }
        if self._schema is None:
            self._schema = schema
        elif schema != self._schema:
            raise ValueError(
                f"episode fields {_describe(schema)} differ from this shard's {_describe(self._schema)}"
            )
        return rows, info, blobs

    # -- writing ---------------------------------------------------------------------------------
    def _create_arrays(self) -> None:
        schema = self._schema
        index = {"start": (np.dtype(np.int64), ()), "length": (np.dtype(np.int64), ())}
        index |= {
            name + end: (np.dtype(np.int64), ())
            for name in schema["blobs"]
            for end in (BLOB_OFFSET, BLOB_SIZE)
        }
        groups = (
            ("steps", schema["steps"]),
            ("episodes", {**index, **schema["episodes"]}),
            ("blobs", schema["blobs"]),
        )
        for group, fields in groups:
            for name, (dtype, shape) in fields.items():
                rows = BLOB_CHUNK if group == "blobs" else chunk_rows(dtype.itemsize * int(np.prod(shape)))
                self._arrays[f"{group}/{name}"] = self._group.create_array(
                    f"{group}/{name}",
                    shape=(0, *shape),
                    chunks=(rows, *shape),
                    dtype=dtype,
                    compressors=compressors_for(dtype),
                    fill_value=0,
                    config={"write_empty_chunks": True},  # an all-zero chunk still exists on disk
                )

    def _write(self, batch) -> None:
        with self._lock:
            if not self._arrays:
                self._create_arrays()
            lengths = np.array([len(next(iter(rows.values()))) for rows, _, _ in batch], np.int64)
            starts = self.steps + np.concatenate([[0], np.cumsum(lengths)[:-1]])
            blocks = {
                f"steps/{k}": np.concatenate([rows[k] for rows, _, _ in batch]) for k in self._schema["steps"]
            }
            blocks |= {
                f"episodes/{k}": np.stack([info[k] for _, info, _ in batch]) for k in self._schema["episodes"]
            }
            blocks |= {"episodes/start": starts, "episodes/length": lengths}
            blocks |= self._blob_blocks([blobs for _, _, blobs in batch])
            n_steps, n_eps = self.steps + int(lengths.sum()), self.episodes + len(batch)
            rows = {key: self.steps if key.startswith("steps/") else self.episodes for key in blocks}
            rows |= {f"blobs/{k}": self.blob_bytes.get(k, 0) for k in self._schema["blobs"]}
            sync(self._grow_and_write([(self._arrays[k].async_array, rows[k], b) for k, b in blocks.items()]))
            for k in self._schema["blobs"]:
                self.blob_bytes[k] = self.blob_bytes.get(k, 0) + len(blocks[f"blobs/{k}"])
            self.episodes, self.steps, self.commits = n_eps, n_steps, self.commits + 1
            write_json(self.path / COMMIT, self.commit_record(), "episode store commit record", indent=1)
        if self.on_commit is not None:
            self.on_commit(self.episodes, self.steps)

    def _blob_blocks(self, batch: list[dict[str, bytes]]) -> dict[str, np.ndarray]:
        """Each blob field's bytes of the batch, concatenated, and the episodes' offsets and sizes."""
        blocks = {}
        for name in self._schema["blobs"]:
            sizes = np.array([len(blobs[name]) for blobs in batch], np.int64)
            blocks[f"episodes/{name}{BLOB_OFFSET}"] = self.blob_bytes.get(name, 0) + np.cumsum(sizes) - sizes
            blocks[f"episodes/{name}{BLOB_SIZE}"] = sizes
            blocks[f"blobs/{name}"] = np.frombuffer(b"".join(blobs[name] for blobs in batch), np.uint8)
        return blocks

    @staticmethod
    async def _grow_and_write(blocks: list) -> None:
        """Grow every array, then write the new rows of all of them concurrently. A failure (a full
        disk) is raised once every write has ended, so that none is left half-done behind it."""
        for step in (
            (
                arr.resize((old + len(block), *arr.shape[1:]), delete_outside_chunks=False)
                for arr, old, block in blocks
            ),
            (arr.setitem(slice(old, old + len(block)), block) for arr, old, block in blocks),
        ):
            failed = [
                r for r in await asyncio.gather(*step, return_exceptions=True) if isinstance(r, BaseException)
            ]
            if failed:
                raise failed[0]

    def commit_record(self) -> dict:
        def fields(group):
            return {k: {"dtype": str(dt), "shape": list(shape)} for k, (dt, shape) in group.items()}

        return {
            "format": STORE_FORMAT,
            "schema_version": SCHEMA_VERSION,
            "shard": self.name,
            "episodes": self.episodes,
            "steps": self.steps,
            "commits": self.commits,
            "time": time.time(),
            "fields": {"steps": fields(self._schema["steps"]), "episodes": fields(self._schema["episodes"])}
            | ({"blobs": fields(self._schema["blobs"])} if self._schema["blobs"] else {}),
            **({"blob_bytes": dict(self.blob_bytes)} if self.blob_bytes else {}),
            "categories": {k: list(v) for k, v in self._categories.items()},
        }


def _describe(schema) -> str:
    return ", ".join(f"{k}:{dt}{list(s)}" for group in schema.values() for k, (dt, s) in group.items())
