"""What every importer shares: the imported agent, and a ledger of the source's tensors.

An importer reads a decoded file (:class:`~proclab.models.importers.source.SourceFile`), infers
the architecture from tensor *shapes* (never from defaults), and renames and reshapes each
tensor into proclab's layout. :class:`SourceTensors` makes that mapping strict: every tensor
is taken exactly once under its source name with the shape the inferred architecture needs,
and whatever is left over at the end is an error naming it, so a file from a variant the
importer does not know is refused instead of half-loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from proclab.errors import ProclabError
from proclab.models.config import AgentConfig
from proclab.models.importers.source import SourceFile

WRAPPER_PREFIXES = ("module.", "_orig_mod.")  # DistributedDataParallel, torch.compile


@dataclass(frozen=True)
class SourceFacts:
    """What the file itself says about its training, where it says it (``None`` otherwise)."""

    step: int | None = None
    step_from: str | None = None  # where ``step`` was read, e.g. "file name model_<steps>.pth"
    game: str | None = None
    mode: str | None = None
    split: str | None = None  # training levels as START:NUM (or a named split)
    said_by: str | None = None  # where game / mode / split were read


@dataclass(frozen=True)
class ImportedAgent:
    """A foreign checkpoint as a proclab agent: its config, weights in proclab's names, and facts."""

    variant: str  # which code base of the format wrote it, as far as the file tells
    config: AgentConfig
    weights: dict[str, Tensor]
    facts: SourceFacts = field(default_factory=SourceFacts)
    conventions: dict[str, str] = field(default_factory=dict)
    """How the source fed its network (observations, actions, previous reward, state resets)."""
    ignored: tuple[str, ...] = ()
    """Source tensors the forward pass never reads (named in the import's metadata)."""


@dataclass(frozen=True)
class Format:
    """One checkpoint family: how to recognise its decoded payload and turn it into an agent."""

    name: str
    label: str
    detect: Callable[[SourceFile], bool]
    convert: Callable[[SourceFile], ImportedAgent]


def state_dict_of(payload: Any) -> dict[str, Tensor] | None:
    """The tensor dict of a ``torch.save`` payload: under ``model_state_dict`` or ``state_dict``,
    or the payload itself; wrapper prefixes (``module.``, ``_orig_mod.``) removed."""
    if not isinstance(payload, Mapping):
        return None
    for key in ("model_state_dict", "state_dict"):
        if isinstance(payload.get(key), Mapping):
            payload = payload[key]
            break
    tensors = {k: v for k, v in payload.items() if isinstance(v, Tensor)}
    if not tensors or len(tensors) != len(payload):
        return None
    for prefix in WRAPPER_PREFIXES:
        if all(k.startswith(prefix) for k in tensors):
            tensors = {k.removeprefix(prefix): v for k, v in tensors.items()}
    return tensors


class SourceTensors:
    """The source's tensors, each to be taken exactly once with a checked shape."""

    def __init__(self, tensors: Mapping[str, Tensor | np.ndarray], path: str):
        self._all = {
            k: torch.as_tensor(np.asarray(v)) if isinstance(v, np.ndarray) else v for k, v in tensors.items()
        }
        self._left = dict(self._all)
        self.path = path

    def __contains__(self, name: str) -> bool:
        return name in self._all

    def names(self) -> list[str]:
        return list(self._all)

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of ``name`` (a one-line error if the file lacks it), without taking it."""
        if name not in self._all:
            raise ProclabError(f"checkpoint {self.path!r} lacks tensor {name!r}")
        return tuple(self._all[name].shape)

    def take(
        self,
        name: str,
        shape: tuple[int, ...] | None = None,
        transform: Callable[[Tensor], Tensor] | None = None,
    ) -> Tensor:
        """Tensor ``name`` as float32, through ``transform`` (a layout change) and then checked
        against ``shape``; each tensor may be taken only once."""
        self.shape(name)
        if name not in self._left:
            raise ProclabError(f"checkpoint {self.path!r}: tensor {name!r} is used twice by the import")
        value = self._left.pop(name).detach().to(torch.float32)
        if transform is not None:
            value = transform(value)
        if shape is not None and tuple(value.shape) != tuple(shape):
            raise ProclabError(
                f"checkpoint {self.path!r}: tensor {name!r} has shape {tuple(self._all[name].shape)}, but "
                f"the architecture inferred from the other tensors needs {tuple(shape)}"
                + (" (in proclab's layout)" if transform is not None else "")
            )
        return value.contiguous()

    def drop(self, name: str) -> str:
        """Mark ``name`` as known but unused by the forward pass; returns the name."""
        self.take(name)
        return name

    def finish(self) -> None:
        """Refuse the file if a tensor was left over: the importer does not know that variant."""
        if self._left:
            first = next(iter(self._left))
            raise ProclabError(
                f"checkpoint {self.path!r} has tensor {first!r} {tuple(self._left[first].shape)} that this "
                f"format's architecture does not use ({len(self._left)} such tensor(s)); it is a variant "
                "proclab cannot import faithfully"
            )


def count_blocks(tensors: SourceTensors, pattern: Callable[[int], str]) -> int:
    """How many consecutive indices ``i = 0, 1, ...`` have a tensor named ``pattern(i)``."""
    n = 0
    while pattern(n) in tensors:
        n += 1
    return n
