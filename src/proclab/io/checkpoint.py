"""Safe, atomic checkpoints.

A checkpoint is a directory::

    step_000065536/
      meta.json            what it is: kind, format version, step, the configs to rebuild it
      model.safetensors    the weights (safetensors: plain tensors, nothing executable)
      train_state.pt       optional: optimiser, RNG, env and normaliser state for exact resume

Loading never unpickles arbitrary objects: weights come from safetensors and the training
state through ``torch.load(weights_only=True)``, which accepts only tensors and plain Python
containers. NumPy arrays are stored as tensors for that reason (:func:`to_safe`).

A checkpoint is written under a temporary name and renamed into place
(:func:`proclab.io.files.replacing`), so a crash (even ``kill -9``) leaves either the previous
checkpoint or the complete new one, never half of one; a full disk removes the temporary and
stops the run with one line, its earlier checkpoints intact. The files are serialised in
memory first, so every byte reaches the disk through one ``write`` whose failure names its cause
(torch's zip writer would report a full disk as an opaque ``RuntimeError``).
"""

from __future__ import annotations

import io
import json
import os
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as safetensors_load
from safetensors.torch import save as safetensors_bytes

from proclab.errors import ProclabError
from proclab.io.files import replacing, sweep_temporaries

FORMAT = "proclab-checkpoint"
FORMAT_VERSION = 1
META, WEIGHTS, TRAIN_STATE = "meta.json", "model.safetensors", "train_state.pt"


@dataclass
class Checkpoint:
    path: Path
    meta: dict[str, Any]
    weights: dict[str, torch.Tensor]
    train_state: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def step(self) -> int:
        return int(self.meta.get("step", 0))


def to_safe(obj: Any) -> Any:
    """Recursively turn NumPy arrays/scalars into tensors/Python numbers (weights_only-loadable)."""
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": torch.from_numpy(np.ascontiguousarray(obj)).clone()}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: to_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(to_safe(v) for v in obj)
    return obj


def from_safe(obj: Any) -> Any:
    """Inverse of :func:`to_safe`."""
    if isinstance(obj, dict):
        if set(obj) == {"__ndarray__"}:
            return obj["__ndarray__"].numpy()
        return {k: from_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(from_safe(v) for v in obj)
    return obj


def save_checkpoint(
    path: str | Path,
    weights: dict[str, torch.Tensor],
    meta: dict[str, Any],
    train_state: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint directory atomically (temporary directory + rename), fsync'ed before the rename."""
    path = Path(path)
    sweep_temporaries(path.parent)  # what a killed writer left
    tensors = {k: v.detach().to("cpu").contiguous() for k, v in weights.items()}
    files = {WEIGHTS: safetensors_bytes(tensors)}
    if train_state is not None:
        buffer = io.BytesIO()
        torch.save(to_safe(train_state), buffer)
        files[TRAIN_STATE] = buffer.getvalue()
    checksums = {name: zlib.crc32(data) for name, data in files.items()}
    full_meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "saved_at": time.time(),
        **meta,
        "crc32": checksums,
    }
    files[META] = json.dumps(full_meta, indent=2, default=str).encode()
    with replacing(path, "checkpoint") as tmp:
        tmp.mkdir()
        for name, data in files.items():
            with open(tmp / name, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())  # durable before the rename publishes it
    return path


def find_checkpoint(path: str | Path) -> Path:
    """Resolve a checkpoint directory, or a run directory to its latest checkpoint."""
    path = Path(path)
    if not path.exists():
        raise ProclabError(f"checkpoint {str(path)!r} does not exist")
    if (path / META).is_file():
        return path
    ckpt_dir = path / "checkpoints"
    if path.is_dir() and ckpt_dir.is_dir():
        found = sorted(p for p in ckpt_dir.iterdir() if (p / META).is_file() and not p.name.startswith("."))
        if found:
            return max(found, key=lambda p: _step_of(p))
        raise ProclabError(f"run directory {str(path)!r} has no checkpoint yet (nothing in {ckpt_dir})")
    raise ProclabError(
        f"{str(path)!r} is not a proclab checkpoint (no {META}) nor a run directory (no checkpoints/)"
    )


def _step_of(path: Path) -> int:
    try:
        return int(json.loads((path / META).read_text()).get("step", -1))
    except (OSError, ValueError):
        return -1


def load_checkpoint_meta(path: str | Path, kind: str | None = None) -> dict[str, Any]:
    """The checked ``meta.json`` of a checkpoint (or of a run directory's latest one)."""
    path = find_checkpoint(path)
    try:
        meta = json.loads((path / META).read_text())
    except (OSError, ValueError) as err:
        raise ProclabError(f"checkpoint {str(path)!r} has an unreadable {META}: {err}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ProclabError(f"{str(path)!r} is not a proclab checkpoint ({META} lacks format={FORMAT!r})")
    if meta.get("format_version", 0) > FORMAT_VERSION:
        raise ProclabError(
            f"checkpoint {str(path)!r} has format version {meta['format_version']}; this proclab reads "
            f"up to {FORMAT_VERSION}; upgrade proclab"
        )
    if kind is not None and meta.get("kind") != kind:
        raise ProclabError(f"checkpoint {str(path)!r} holds a {meta.get('kind')!r}, not a {kind!r}")
    return meta


def load_checkpoint(path: str | Path, *, kind: str | None = None, train_state: bool = False) -> Checkpoint:
    """Load and validate a checkpoint; any corruption is a one-line :class:`ProclabError`."""
    path = find_checkpoint(path)
    meta = load_checkpoint_meta(path, kind)
    try:
        weights = safetensors_load(_checked_bytes(path / WEIGHTS, meta))
    except (OSError, SafetensorError, ValueError) as err:
        raise ProclabError(
            f"checkpoint weights {str(path / WEIGHTS)!r} are missing or corrupt: {err}"
        ) from None
    state = load_train_state(path, meta) if train_state else None
    # Absolute, because the path is recorded in stores and runs that are read from other directories.
    return Checkpoint(path=path.resolve(), meta=meta, weights=weights, train_state=state)


def _checked_bytes(file: Path, meta: dict) -> bytes:
    """The bytes of a checkpoint file, checked against the CRC32 recorded in ``meta.json`` (checkpoints
    written before proclab recorded them are taken as they are)."""
    data = file.read_bytes()
    expected = meta.get("crc32", {}).get(file.name)
    if expected is not None and zlib.crc32(data) != expected:
        raise ValueError(
            f"checksum mismatch (CRC32 {zlib.crc32(data)} instead of {expected}): damaged on disk"
        )
    return data


def load_train_state(path: Path, meta: dict | None = None) -> dict[str, Any]:
    """The training state of the checkpoint directory ``path`` (optimiser, RNG, trainer statistics)."""
    if not (path / TRAIN_STATE).is_file():
        raise ProclabError(f"checkpoint {str(path)!r} has no training state ({TRAIN_STATE}); cannot resume")
    try:
        data = _checked_bytes(path / TRAIN_STATE, meta if meta is not None else load_checkpoint_meta(path))
        return from_safe(torch.load(io.BytesIO(data), map_location="cpu", weights_only=True))
    except Exception as err:  # torch raises many types for truncated or foreign files
        raise ProclabError(f"training state {str(path / TRAIN_STATE)!r} is corrupt: {err}") from None


def load_weights_into(module: torch.nn.Module, weights: dict[str, torch.Tensor], source: str | Path) -> None:
    """Load ``weights`` strictly, naming every mismatching key if the architectures differ."""
    own = module.state_dict()
    missing = sorted(set(own) - set(weights))
    unexpected = sorted(set(weights) - set(own))
    shape = sorted(k for k in set(own) & set(weights) if own[k].shape != weights[k].shape)
    if missing or unexpected or shape:
        parts = []
        for label, keys in (("missing", missing), ("unexpected", unexpected), ("wrong shape", shape)):
            if keys:
                shown = ", ".join(
                    f"{k} {tuple(weights[k].shape)} vs {tuple(own[k].shape)}" if label == "wrong shape" else k
                    for k in keys[:6]
                )
                parts.append(f"{label}: {shown}" + (f" (+{len(keys) - 6} more)" if len(keys) > 6 else ""))
        raise ProclabError(
            f"checkpoint {str(source)!r} does not match this architecture; " + "; ".join(parts)
        )
    module.load_state_dict(weights)
