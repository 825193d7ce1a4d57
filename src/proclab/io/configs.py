"""Configs as JSON: every frozen config dataclass written to and read back from plain data.

Run directories (``config.json``), checkpoints (``meta.json``) and recordings (store attributes)
hold configs in this form; :func:`from_dict` rebuilds them with their types (tuples, paths,
nested configs) and refuses unknown field names with one line.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

from proclab.errors import ProclabError


def to_dict(config: Any) -> Any:
    """A config as JSON-ready data (tuples become lists, paths absolute strings).

    Paths are made absolute so that a saved config (a run's ``config.json``, a recording's
    attributes) still points at the same files when read from another working directory.
    """
    if dataclasses.is_dataclass(config):
        return {f.name: to_dict(getattr(config, f.name)) for f in dataclasses.fields(config)}
    if isinstance(config, tuple | list):
        return [to_dict(v) for v in config]
    if isinstance(config, Path):
        return str(config.absolute())
    return config


def from_dict(cls: type, data: dict[str, Any]) -> Any:
    """Rebuild a (nested) config dataclass from :func:`to_dict` output, checking field names."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ProclabError(f"config has unknown {cls.__name__} fields: {', '.join(unknown)}")
    return cls(**{k: _coerce(hints[k], v) for k, v in data.items()})


def with_fields(config: Any, **fields: Any) -> Any:
    """``config`` with ``fields`` replaced: the keyword arguments of a library call (``train_world_model(data,
    "cpu", total_updates=300)``) are a config's fields; a name the config lacks is one line naming the valid
    ones, not a TypeError from deep inside ``dataclasses``."""
    names = [f.name for f in dataclasses.fields(config)]
    unknown = sorted(set(fields) - set(names))
    if unknown:
        raise ProclabError(
            f"{type(config).__name__} has no field {', '.join(unknown)}; valid: {', '.join(names)}"
        )
    return dataclasses.replace(config, **fields)


def _coerce(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _coerce(inner[0], value) if len(inner) == 1 else value
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value)
    if origin is tuple:
        args = typing.get_args(tp)
        elem = args[0] if args else Any
        return tuple(_coerce(elem, v) for v in value)
    if tp is Path:
        return Path(value)
    return value
