"""Interventions: edits of any named activation, declared as data and applied by one agent wrapper.

An :class:`Intervention` says *where* (a hook point, ``agent.hook_names()``), *what part* of the
activation (a selection), *what to do* there (a kind and its value), and optionally *for which rows*
of the batch and *at which steps* of each row's episode. It holds no state and no callables, so a
list of them describes an experiment completely (pyvene's "interventions as data"), and
:class:`~proclab.models.edited.Intervened` is the one agent that applies such a list on every forward pass
while answering as an agent does (``initial_state``, ``step``, ``unroll``, its hook points): evaluation,
recording, rollouts, the sweep, steering and saliency all play an edited agent through it. This module
holds the data and how an edit changes an activation (:class:`Editor`); the edited agent applies them.

**Selections** (one sample's activation has shape ``(C, H, W)`` for a conv map, ``(D,)`` for a flat
hook; ``agent.hook_shapes()`` lists them): :class:`All`; :class:`Channels` (whole channels of a
conv map, or units of a flat hook); :class:`Sites` (one channel at one position each);
:class:`Units` (units of a flat hook); :class:`Direction` (the component along a vector over the
first axis, at every position); :class:`Mask` (a boolean tensor of the sample's shape, or one per
row); :class:`Coordinates` (coordinates of a basis fitted at the hook: anything with ``encode`` /
``write``, for example :class:`proclab.interpret.bases.coordinates.LinearCoordinates`).

**Kinds**: ``set`` (to ``value``), ``add`` (``value``; along a direction ``value`` times the vector,
unnormalised, which is how a steering vector is added at a coefficient), ``scale`` (by ``value``),
``mean`` (to ``source``, the activation's recorded mean), ``resample`` (to a row of ``source``, a
pool of recorded activations, drawn per row at every call), ``patch`` (to ``source``, the activation
of another forward pass, one per row). On coordinates, also ``swap`` (exchange coordinate ``index``
with ``other``) and ``move`` (add coordinate ``index`` onto ``other`` and zero it). A direction or
coordinate edit changes only its component: what lies outside it is kept bit for bit.

**Values.** ``value`` is a number or a tensor of the sample's shape (a full-shape steering vector);
with ``per_row=True`` its first axis runs over the batch's rows (``(B,)`` or ``(B, *sample)``), which
is how one forward pass plays many variants of an edit (each row its own level's vector, its own
coordinate and value). ``rows`` restricts the edit to some rows. A player that says which episode each
row plays (:meth:`~proclab.models.edited.Intervened.playing`; :func:`proclab.rollout` does) makes rows
episodes: entry ``i`` is episode ``i``'s, whatever the live batch. ``steps=(start, stop)`` restricts
the edit to the steps of each row's episode in ``[start, stop)`` (``stop`` None: to the end; a ``(B,)``
tensor: per row, a negative entry never stops; the edited agent then counts steps in its state, under
:data:`STEP_KEY`). ``of="increment"`` (recurrent state hooks only) edits the change ``h_t - h_{t-1}``
of the state rather than the state: the interpreting-rl-behavior direction edits.

**Captures see edits.** Edits run before any other forward hook at their hook point, so an
activation cache (:func:`~proclab.models.edited.run_with_cache`, :func:`proclab.models.hooks.capture`) records
the value *after* every intervention at that hook: what the rest of the network read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeGuard, cast

import torch
from torch import Tensor

from proclab.errors import ProclabError, unknown_choice

KINDS = {
    "set": "set to VALUE",
    "add": "add VALUE (a direction: VALUE times the vector)",
    "scale": "multiply by VALUE",
    "mean": "mean-ablation: replace by the recorded mean (source)",
    "resample": "resample-ablation: replace by a recorded activation drawn at random (source)",
    "patch": "replace by the activation of another forward pass (source, one per row)",
    "swap": "coordinates only: exchange coordinate INDEX with OTHER",
    "move": "coordinates only: add coordinate INDEX onto OTHER and zero it",
}
NEEDS_SOURCE = ("mean", "resample", "patch")
COORDINATE_ONLY = ("swap", "move")
OF = ("value", "increment")
STEP_KEY = "interventions.step"
"""State entry of the edited agent holding each row's step in its episode (when some edit has ``steps``)."""


# -- selections ------------------------------------------------------------------------------------
class _MaskSelection:
    """A selection that is a fixed set of elements of one sample (or of each row, for :class:`Mask`)."""

    def mask(self, shape: Sequence[int], hook: str) -> Tensor:
        raise NotImplementedError


@dataclass(frozen=True)
class All(_MaskSelection):
    """The whole activation."""

    def mask(self, shape: Sequence[int], hook: str) -> Tensor:
        return torch.ones(tuple(shape), dtype=torch.bool)

    def describe(self) -> str:
        return "all"


@dataclass(frozen=True)
class Channels(_MaskSelection):
    """Whole channels of a conv map (every position), or units of a flat hook."""

    channels: tuple[int, ...]

    def mask(self, shape: Sequence[int], hook: str) -> Tensor:
        m = torch.zeros(tuple(shape), dtype=torch.bool)
        for c in self.channels:
            _check_index(c, shape[0], "channel", hook)
        m[list(self.channels)] = True
        return m

    def describe(self) -> str:
        return f"channel{'s' * (len(self.channels) > 1)} {','.join(map(str, self.channels))}"


@dataclass(frozen=True)
class Sites(_MaskSelection):
    """Positions of a conv map: ``(channel, y, x)`` each."""

    sites: tuple[tuple[int, int, int], ...]

    def mask(self, shape: Sequence[int], hook: str) -> Tensor:
        if len(shape) != 3:
            raise ProclabError(f"a site edit needs a conv map; {hook} has per-sample shape {tuple(shape)}")
        m = torch.zeros(tuple(shape), dtype=torch.bool)
        for c, y, x in self.sites:
            for v, n, what in ((c, shape[0], "channel"), (y, shape[1], "y"), (x, shape[2], "x")):
                _check_index(v, n, what, hook)
            m[c, y, x] = True
        return m

    def describe(self) -> str:
        return f"site{'s' * (len(self.sites) > 1)} " + " ".join(f"{c}@{y},{x}" for c, y, x in self.sites)


@dataclass(frozen=True)
class Units(_MaskSelection):
    """Units of a flat hook (a recurrent state, ``torso.hook_fc``)."""

    units: tuple[int, ...]

    def mask(self, shape: Sequence[int], hook: str) -> Tensor:
        if len(shape) != 1:
            raise ProclabError(f"a units edit needs a flat hook; {hook} has per-sample shape {tuple(shape)}")
        for u in self.units:
            _check_index(u, shape[0], "unit", hook)
        m = torch.zeros(tuple(shape), dtype=torch.bool)
        m[list(self.units)] = True
        return m

    def describe(self) -> str:
        return f"unit{'s' * (len(self.units) > 1)} {','.join(map(str, self.units))}"


@dataclass(frozen=True, eq=False)
class Mask(_MaskSelection):
    """A boolean tensor of the sample's shape, or with ``per_row`` one per row ``(B, *sample)``."""

    mask_: Tensor

    def mask(self, shape: Sequence[int], hook: str) -> Tensor:
        return self.mask_.bool()

    def describe(self) -> str:
        return "mask"


@dataclass(frozen=True, eq=False)
class Direction:
    """The component along ``vector`` over the sample's first axis (channels at every position of a conv
    map, or the whole vector of a flat hook)."""

    vector: Tensor

    def describe(self) -> str:
        return "direction"


class CoordinateSystem(Protocol):
    """What a :class:`Coordinates` selection needs of a basis: ``k`` coordinates of ``dim``-float samples,
    ``encode`` (``(N, dim) -> (N, k)``) and ``write`` (the samples with their coordinates changed, the
    rest kept); for increment edits also ``encode_change`` / ``decode_change`` (no origin)."""

    k: int
    dim: int

    def encode(self, h: Tensor) -> Tensor: ...

    def write(self, h: Tensor, c: Tensor, c_new: Tensor) -> Tensor: ...


@dataclass(frozen=True, eq=False)
class Coordinates:
    """Coordinate ``index`` (and ``other``, for swap and move) of ``system``, a basis of the hook's flattened
    samples; with ``per_row`` both are ``(B,)`` tensors and a row with ``index < 0`` is not edited."""

    system: Any
    index: int | Tensor
    other: int | Tensor | None = None

    def describe(self) -> str:
        name = getattr(self.system, "label", "coordinate")
        if isinstance(self.index, Tensor):
            return f"{name} per row"
        return f"{name} {self.index}" + ("" if self.other is None else f":{self.other}")


Selection = All | Channels | Sites | Units | Mask | Direction | Coordinates


# -- the intervention ------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Intervention:
    """One edit at one hook point (see the module docstring)."""

    hook: str
    select: Selection | str = "all"
    kind: str = "set"
    value: float | Tensor = 0.0
    source: Tensor | None = None
    per_row: bool = False
    rows: Tensor | Sequence[int] | None = None
    steps: tuple[int, int | Tensor | None] | None = None
    of: str = "value"

    def __post_init__(self) -> None:
        if isinstance(self.select, str):
            object.__setattr__(self, "select", parse_selection(self.select))
        if self.kind not in KINDS:
            raise unknown_choice("intervention kind", self.kind, KINDS)
        if self.kind in NEEDS_SOURCE and self.source is None:
            raise ProclabError(f"a {self.kind} edit at {self.hook} needs the activation it writes (source)")
        sel = self._selection
        coords = isinstance(sel, Coordinates)
        if self.kind in COORDINATE_ONLY and (not isinstance(sel, Coordinates) or sel.other is None):
            raise ProclabError(f"a {self.kind} edit at {self.hook} needs coordinates INDEX and OTHER")
        if self.of not in OF:
            raise unknown_choice("of", self.of, OF)
        if self.of == "increment" and not coords:
            raise ProclabError(f"an increment edit at {self.hook} needs coordinates (a basis of the state)")
        if self.steps is not None and (
            self.steps[0] < 0 or (_is_number(self.steps[1]) and self.steps[1] < 0)
        ):
            raise ProclabError(f"steps {self.steps} of an edit at {self.hook} must be >= 0")

    @property
    def _selection(self) -> Selection:
        """``select`` as its selection object: text is parsed when the edit is made (``__post_init__``)."""
        return cast(Selection, self.select)

    def describe(self) -> str:
        """One line: ``hook selection kind [value]``."""
        value = ""
        if self.kind in ("set", "add", "scale"):
            value = (
                " per row" if self.per_row else (f" {self.value:g}" if _is_number(self.value) else " tensor")
            )
        when = ""
        if self.steps is not None:
            stop = self.steps[1]
            last = (
                ""
                if stop is None
                else ("per row" if isinstance(stop, Tensor) and stop.dim() else int(stop) - 1)
            )
            when = f" steps {self.steps[0]}-{last}"
        of = " of the increment" if self.of == "increment" else ""
        return f"{self.hook} {self._selection.describe()} {self.kind}{value}{of}{when}"

    def to_dict(self) -> dict:
        """The edit as JSON-able data, losslessly: :meth:`from_dict` gives it back equal in every field
        (tensors with their dtype and shape). A :class:`Coordinates` selection names its system (its
        ``name``); the system itself, a basis, is saved with the analysis that fitted it and passed back to
        :meth:`from_dict` by that name."""
        sel = self._selection
        select: dict[str, Any] = {"type": type(sel).__name__.lower()}
        for f in ("channels", "sites", "units"):
            if hasattr(sel, f):
                select[f] = [list(s) if isinstance(s, tuple) else s for s in getattr(sel, f)]
        if isinstance(sel, Direction):
            select["vector"] = _encoded(sel.vector)
        if isinstance(sel, Mask):
            select["mask"] = _encoded(sel.mask_)
        if isinstance(sel, Coordinates):
            select |= {"system": _system_name(sel.system), "index": _encoded(sel.index)}
            select["other"] = _encoded(sel.other)
        return {
            "hook": self.hook,
            "select": select,
            "kind": self.kind,
            "value": _encoded(self.value),
            "source": _encoded(self.source),
            "per_row": self.per_row,
            "rows": _encoded(self.rows if not isinstance(self.rows, tuple) else list(self.rows)),
            "steps": None if self.steps is None else [_encoded(v) for v in self.steps],
            "of": self.of,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], systems: Mapping[str, Any] | None = None) -> Intervention:
        """The edit :meth:`to_dict` wrote; ``systems`` maps a coordinate selection's system name to the
        system (the basis it was fitted as, e.g. ``{"ica": LinearCoordinates(basis, "ica")}``)."""
        sel = dict(data["select"])
        sel_type = sel.pop("type")
        if sel_type == "all":
            select: Selection = All()
        elif sel_type == "channels":
            select = Channels(tuple(sel["channels"]))
        elif sel_type == "sites":
            select = Sites(tuple(tuple(s) for s in sel["sites"]))
        elif sel_type == "units":
            select = Units(tuple(sel["units"]))
        elif sel_type == "direction":
            select = Direction(_decoded(sel["vector"]))
        elif sel_type == "mask":
            select = Mask(_decoded(sel["mask"]))
        elif sel_type == "coordinates":
            name = sel["system"]
            if systems is None or name not in systems:
                raise ProclabError(
                    f"the edit at {data['hook']} holds coordinates of system {name!r}: pass systems={{{name!r}: ...}}"
                )
            select = Coordinates(systems[name], _decoded(sel["index"]), _decoded(sel["other"]))
        else:
            raise unknown_choice("selection type", sel_type, ["all", "channels", "sites", "units", "direction",
                                                             "mask", "coordinates"])  # fmt: skip
        steps = data.get("steps")
        return cls(
            hook=data["hook"],
            select=select,
            kind=data["kind"],
            value=_decoded(data["value"]),
            source=_decoded(data.get("source")),
            per_row=bool(data.get("per_row", False)),
            rows=_decoded(data.get("rows")),
            steps=None if steps is None else tuple(_decoded(v) for v in steps),
            of=data.get("of", "value"),
        )


def _is_number(v: object) -> TypeGuard[int | float | Tensor]:
    return isinstance(v, int | float) or (isinstance(v, Tensor) and v.dim() == 0)


def _encoded(v: Any) -> Any:
    """A value of an edit as JSON: a tensor as ``{"tensor": nested list, "dtype": ..., "shape": [...]}`` (its
    entries exactly: float32 and bfloat16 values are doubles exactly), anything else as it is."""
    if isinstance(v, Tensor):
        return {"tensor": v.detach().cpu().tolist(), "dtype": str(v.dtype).removeprefix("torch."),
                "shape": list(v.shape)}  # fmt: skip
    return v


def _decoded(v: Any) -> Any:
    """The inverse of :func:`_encoded`."""
    if isinstance(v, Mapping) and "tensor" in v:
        dtype = getattr(torch, v["dtype"])
        return torch.tensor(v["tensor"], dtype=dtype).reshape(v["shape"])
    return v


def _system_name(system) -> str:
    return getattr(system, "name", "coordinates")


def _check_index(v: int, n: int, what: str, hook: str) -> None:
    if not 0 <= v < n:
        raise ProclabError(f"{what} {v} is outside 0-{n - 1} at {hook}")


# -- text ------------------------------------------------------------------------------------------
_SELECT = re.compile(
    r"all|(?P<ck>channels?)\s+(?P<c>\d+(?:\s*,\s*\d+)*)|(?P<sk>sites?)\s+(?P<s>\d+@\d+,\d+(?:\s+\d+@\d+,\d+)*)"
    r"|units?\s+(?P<u>\d+(?:\s*,\s*\d+)*)"
)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.replace(" ", "").split(","))


def parse_selection(text: str) -> Selection:
    """``"all"``, ``"channel 7"``, ``"channels 10,27"``, ``"site 7@4,5"``, ``"sites 7@4,5 8@1,2"``,
    ``"units 1,2"`` -> a selection (directions, masks and coordinates are objects, not text)."""
    m = _SELECT.fullmatch(text.strip())
    if m is None:
        raise ProclabError(
            f"selection {text!r}: expected all, 'channels C,...', 'sites C@Y,X ...' or 'units I,...' "
            "(e.g. 'channels 10,27', 'site 7@4,5')"
        )
    if m.group("c"):
        return Channels(_ints(m.group("c")))
    if m.group("s"):
        sites = re.findall(r"(\d+)@(\d+),(\d+)", m.group("s"))
        return Sites(tuple((int(c), int(y), int(x)) for c, y, x in sites))
    if m.group("u"):
        return Units(_ints(m.group("u")))
    return All()


_EDIT = re.compile(r"(?P<select>.*?)\s+(?P<kind>[a-z]+)(?:\s+(?P<value>[-+0-9.eE]+))?")


def parse_intervention(hook: str, text: str, source: Tensor | None = None) -> Intervention:
    """``--edit`` text -> an :class:`Intervention` at ``hook``: ``"channel 7 set 0"``, ``"site 7@4,5 add 3"``,
    ``"units 1,2 scale 2"``, ``"all mean"``, ``"channels 3,4 resample"`` (``source``: what mean and
    resample write)."""
    m = _EDIT.fullmatch(text.strip())
    if m is None or m.group("kind") not in KINDS:
        raise ProclabError(
            f"--edit {text!r}: expected SELECTION KIND [VALUE], e.g. 'channel 7 set 0', 'site 7@4,5 add 3', "
            f"'units 1,2 scale 2', 'all mean'; kinds: set, add, scale, mean, resample"
        )
    kind = m.group("kind")
    if kind in ("patch", *COORDINATE_ONLY):
        raise unknown_choice("edit kind", kind, ["set", "add", "scale", "mean", "resample"])
    if (kind in ("set", "add", "scale")) != (m.group("value") is not None):
        raise ProclabError(f"--edit {text!r}: set/add/scale take a VALUE, mean/resample none")
    return Intervention(
        hook, parse_selection(m.group("select")), kind, float(m.group("value") or 0.0), source
    )


def parse_edits(texts: Sequence[str]) -> list[Intervention]:
    """``--edit`` options of the commands that play an agent (``eval``, ``record``): each ``"HOOK SELECTION
    KIND VALUE"``, e.g. ``"torso.block1.hook_out channel 7 set 0"``; kinds that need recorded activations
    (mean, resample) are ``analyze edit``'s, which records them."""
    edits = []
    for text in texts:
        hook, _, rest = text.strip().partition(" ")
        if not rest:
            raise ProclabError(
                f"--edit {text!r}: expected HOOK SELECTION KIND VALUE, e.g. 'torso.hook_fc units 3 set 0'"
            )
        edit = parse_intervention(hook, rest, source=torch.zeros(0))
        if edit.kind in NEEDS_SOURCE:
            raise ProclabError(
                f"--edit {text!r}: a {edit.kind} edit needs recorded activations; use analyze edit"
            )
        edits.append(replace(edit, source=None))
    return edits


# -- applying --------------------------------------------------------------------------------------
@dataclass
class Call:
    """What an edit needs to know of one call of its hook: the rows' episode steps, the carried state, and
    which episode each row plays (when the caller says: :meth:`~proclab.models.edited.Intervened.playing`)."""

    T: int
    B: int
    steps: Tensor | None  # (T, B) episode step of each row, when counted
    prev: Tensor | None = None  # (B, ...) the state leaving the previous step (increment edits)
    episodes: Tensor | None = None  # (B,) the episode each row plays; None: row r is episode r

    def of_rows(self, x: Tensor, what: str, hook: str) -> Tensor:
        """``x`` (one entry per episode, first axis) for this call's ``B`` rows: ``x[episodes]``, or ``x``
        itself when rows are episodes; a one-line error when ``x`` has the wrong number of entries."""
        if self.episodes is None:
            if len(x) != self.B:
                raise ProclabError(
                    f"the {what} of the edit at {hook} has {len(x)} rows, the batch {self.B}: give one per "
                    "row (per episode of a rollout)"
                )
            return x
        if len(self.episodes) and int(self.episodes.max()) >= len(x):
            raise ProclabError(
                f"the {what} of the edit at {hook} has {len(x)} rows, but episode "
                f"{int(self.episodes.max())} is playing: give one per episode"
            )
        return x[self.episodes.to(x.device)]


def _rows_mask(iv: Intervention, call: Call, device) -> Tensor | None:
    """``(B,)`` whether each row of the call is one of the edit's ``rows`` (None: every row)."""
    if iv.rows is None:
        return None
    r = torch.as_tensor(iv.rows, device=device)
    if r.dtype == torch.bool:
        return call.of_rows(r, "rows mask", iv.hook)
    r = r.long().reshape(-1)
    if call.episodes is not None:
        return torch.isin(call.episodes.to(device), r)
    if len(r) and not (int(r.min()) >= 0 and int(r.max()) < call.B):
        raise ProclabError(f"rows {r.tolist()} of the edit at {iv.hook}: the batch has rows 0-{call.B - 1}")
    m = torch.zeros(call.B, dtype=torch.bool, device=device)
    m[r] = True
    return m


def active_rows(iv: Intervention, call: Call, t: slice, device) -> Tensor | None:
    """``(t, B)`` rows edited at these time steps (None: all)."""
    mask = _rows_mask(iv, call, device)
    if iv.steps is not None:
        start, stop = iv.steps
        assert call.steps is not None  # an edited agent counts steps when an edit has steps (Intervened)
        s = call.steps[t]
        window = s >= start
        if isinstance(stop, Tensor) and stop.dim():  # per row; a negative stop never comes
            stop = call.of_rows(stop, "steps' stop", iv.hook).to(s.device)
            window = window & ((stop < 0) | (s < stop))
        elif stop is not None:
            window = window & (s < stop)
        mask = window if mask is None else window & mask
    elif mask is not None:
        mask = mask.expand(t.stop - t.start, call.B)
    return mask


def _per_row(x: Tensor, T: int) -> Tensor:
    """A per-row tensor ``(B, ...)`` tiled over ``T`` time steps, time-major ``(T*B, ...)``."""
    return x.repeat(T, *([1] * (x.dim() - 1)))


class Editor:
    """Applies one :class:`Intervention` to ``(N, *sample)`` rows (``N = T*B``, time-major)."""

    def __init__(self, iv: Intervention, shape: tuple[int, ...], generator: torch.Generator):
        self.iv, self.shape, self.generator = iv, shape, generator
        sel = iv._selection
        self.mask = None if isinstance(sel, Direction | Coordinates) else sel.mask(shape, iv.hook)
        self._check_shapes()

    def _check_shapes(self) -> None:
        """Refuse, in one line and before anything plays, a value, mask or vector that cannot fit the hook's
        per-sample shape (a per-row one after its first axis, which runs over rows)."""
        iv, sel = self.iv, self.iv._selection
        hook, shape = iv.hook, self.shape
        parts = []
        if isinstance(iv.value, Tensor) and iv.value.dim() and not isinstance(sel, Coordinates):
            parts.append(("value", iv.value.shape[1:] if iv.per_row else iv.value.shape))
        if isinstance(sel, Mask):
            parts.append(("mask", sel.mask_.shape[1:] if iv.per_row else sel.mask_.shape))
        for what, got in parts:
            if iv.per_row and isinstance(sel, Direction):
                continue  # one coefficient per row along the vector
            try:
                torch.broadcast_shapes(tuple(got), shape)
            except RuntimeError:
                raise ProclabError(
                    f"the {what} of the edit at {hook} has shape {tuple(got)}"
                    f"{' per row' if iv.per_row else ''}; one sample there is {shape}"
                ) from None
        if isinstance(sel, Direction) and sel.vector.numel() != shape[0]:
            raise ProclabError(
                f"the direction at {hook} has {sel.vector.numel()} entries; the hook has {shape[0]} "
                f"{'channels' if len(shape) == 3 else 'units'} (one sample is {shape})"
            )

    def __call__(self, rows: Tensor, active: Tensor | None, call: Call) -> Tensor:
        iv, sel = self.iv, self.iv._selection
        if active is not None and not bool(active.any()):
            return rows
        if isinstance(sel, Coordinates):
            return self._coordinates(rows, sel, active, call)
        if isinstance(sel, Direction):
            out = self._along(rows, sel.vector, call)
        else:
            assert self.mask is not None  # every selection but a direction or coordinates has one
            mask = self.mask.to(rows.device)
            if iv.per_row and isinstance(sel, Mask):
                mask = _per_row(call.of_rows(mask, "mask", iv.hook), call.T)
            out = torch.where(mask, self._target(rows, call), rows)
        if active is None:
            return out
        return torch.where(active.reshape(-1, *([1] * len(self.shape))), out, rows)

    def _value(self, rows: Tensor, call: Call) -> Tensor | float:
        v = self.iv.value
        if not isinstance(v, Tensor):
            return v
        v = v.to(device=rows.device, dtype=rows.dtype)
        if self.iv.per_row:
            v = _per_row(call.of_rows(v, "value", self.iv.hook), call.T)
            return v.reshape(len(v), *([1] * (rows.dim() - 1))) if v.dim() == 1 else v
        return v

    def _target(self, rows: Tensor, call: Call) -> Tensor:
        kind = self.iv.kind
        if kind == "set":
            return _filled(rows, self._value(rows, call))
        if kind == "add":
            return rows + self._value(rows, call)
        if kind == "scale":
            return rows * self._value(rows, call)
        assert self.iv.source is not None  # the kinds left need one (Intervention.__post_init__)
        src = self.iv.source.to(device=rows.device, dtype=rows.dtype)
        if kind == "resample":
            pool = src.reshape(-1, *self.shape)
            pick = torch.randint(0, len(pool), (len(rows),), generator=self.generator)
            return pool[pick.to(pool.device)]
        if src.shape == self.shape:
            return src.expand_as(rows)
        src = src.reshape(-1, *self.shape)
        if self.iv.per_row:
            src = call.of_rows(src, "source", self.iv.hook)
        if len(src) == call.B and call.T > 1:
            src = _per_row(src, call.T)
        if len(src) != len(rows):
            raise ProclabError(
                f"{kind} at {self.iv.hook}: the source has {len(src)} rows, the activation {len(rows)}"
            )
        return src

    def _along(self, rows: Tensor, vector: Tensor, call: Call) -> Tensor:
        """Direction edits: act on the component along the vector over dim 1 (channels, or the vector)."""
        iv = self.iv
        d = vector.to(device=rows.device, dtype=rows.dtype).reshape(-1)
        if len(d) != rows.shape[1]:
            raise ProclabError(
                f"the direction at {iv.hook} has {len(d)} entries, the activation {rows.shape[1]} channels"
            )
        shape = (1, -1) + (1,) * (rows.dim() - 2)
        d = d.view(shape)
        if iv.kind == "add":
            return rows + self._value(rows, call) * d
        unit = d / d.pow(2).sum().sqrt()
        comp = (rows * unit).sum(1, keepdim=True)
        if iv.kind == "set":
            new = _filled(comp, self._value(rows, call))
        elif iv.kind == "scale":
            new = comp * self._value(rows, call)
        else:
            new = (self._target(rows, call) * unit).sum(1, keepdim=True)
        return rows + (new - comp) * unit

    def _coordinates(self, rows: Tensor, sel: Coordinates, active: Tensor | None, call: Call) -> Tensor:
        iv = self.iv
        system = sel.system
        n = len(rows)
        h = rows.reshape(n, -1)
        if h.shape[1] != system.dim:
            raise ProclabError(
                f"the basis has {system.dim} dimensions but hook {iv.hook!r} has {h.shape[1]} per sample"
            )
        index = _index(sel.index, n, call, h.device, iv.hook)
        other = None if sel.other is None else _index(sel.other, n, call, h.device, iv.hook)
        edited = index >= 0
        if active is not None:
            edited = edited & active.reshape(-1)
        if int(index.max()) >= system.k or (other is not None and int(other.max()) >= system.k):
            worst = int(max(index.max(), -1 if other is None else other.max()))
            raise ProclabError(f"coordinate {worst} is outside the basis' directions 0-{system.k - 1}")
        if iv.kind == "resample":
            if not bool(edited.any()):
                return rows
            pool = iv.source
            assert pool is not None  # a resample edit has its pool (Intervention.__post_init__)
            pick = torch.randint(0, len(pool), (n,), generator=self.generator)
            value = pool[pick, index.clamp(min=0).cpu()].to(h.device, h.dtype)
        else:
            value = self._value(h, call) if iv.kind in ("set", "add", "scale") else None
            if value is not None and not isinstance(value, Tensor):
                value = torch.full((n,), float(value), device=h.device, dtype=h.dtype)
            elif value is not None:
                value = value.expand(n) if value.dim() == 0 else value.reshape(n)
        prev = None
        if iv.of == "increment":
            assert call.prev is not None  # an increment edit's hook is a state's, which carries it
            prev = call.prev.reshape(n, -1).to(h.dtype)
        out = edit_coordinates(system, h, iv.kind, torch.where(edited, index, -1), other, value, prev)
        return out.reshape(rows.shape)


def _filled(like: Tensor, value: Tensor | float) -> Tensor:
    """``value`` at every entry of ``like``: a number, or a tensor that broadcasts to it (one per row)."""
    return torch.full_like(like, value) if not isinstance(value, Tensor) else value.expand_as(like)


def _index(index: int | Tensor, n: int, call: Call, device, hook: str) -> Tensor:
    """A coordinate per row of the call's ``n = T*B`` rows: one for all, or one per episode tiled over time."""
    if isinstance(index, Tensor):
        idx = index.to(device)
        if idx.dim() == 0:
            return idx.expand(n)
        return _per_row(call.of_rows(idx, "coordinate", hook), call.T)
    return torch.full((n,), int(index), dtype=torch.long, device=device)


def edit_coordinates(
    system,
    h: Tensor,
    kind: str,
    index: Tensor,
    other: Tensor | None = None,
    value: Tensor | None = None,
    prev: Tensor | None = None,
) -> Tensor:
    """Per row ``r`` of ``h`` (``(N, dim)``): coordinate ``index[r]`` of ``system`` set to / raised by /
    multiplied by ``value[r]`` (``set`` / ``add`` / ``scale``; ``resample`` sets a drawn value), or exchanged
    with (``swap``) or moved onto (``move``) coordinate ``other[r]``; rows with ``index[r] < 0`` are returned
    untouched, and in edited rows what the coordinates do not describe is kept.

    With ``prev`` (the state leaving the previous step) the coordinates edited are those of the increment
    ``h - prev`` (``system.encode_change`` / ``decode_change``: no origin), the interpretation-of-RL
    direction edits; otherwise those of the state itself (``encode`` / ``write``)."""
    edited = index >= 0
    if prev is None:
        c = system.encode(h)
        out = system.write(h, c, _edit_coordinates(c, edited, index, other, kind, value))
    else:
        c = system.encode_change(h - prev)
        out = h + system.decode_change(_edit_coordinates(c, edited, index, other, kind, value) - c)
    return torch.where(edited[:, None], out, h)


def _edit_coordinates(c: Tensor, edited: Tensor, index: Tensor, other, kind: str, value) -> Tensor:
    """``c`` with, in every edited row ``r``, coordinate ``index[r]`` set/added/scaled/drawn, or swapped
    or moved with ``other[r]``."""
    rows = edited.nonzero().squeeze(1)
    i = index[rows]
    c_new = c.clone()
    if kind in ("set", "resample"):
        c_new[rows, i] = value[rows].to(c.dtype)
    elif kind == "add":
        c_new[rows, i] = c[rows, i] + value[rows].to(c.dtype)
    elif kind == "scale":
        c_new[rows, i] = c[rows, i] * value[rows].to(c.dtype)
    elif kind == "swap":
        j = other[rows]
        c_new[rows, i], c_new[rows, j] = c[rows, j], c[rows, i]
    elif kind == "move":
        j = other[rows]
        c_new[rows, i] = 0
        c_new[rows, j] = c_new[rows, j] + c[rows, i]
    else:
        raise ProclabError(
            f"a {kind} edit is not defined on coordinates (set, add, scale, resample, swap, move)"
        )
    return c_new


def state_hook(key: str) -> str:
    """The per-step hook point a recurrent state tensor passes at every step: ``core.0.h`` -> ``core.0.hook_h``."""
    prefix, name = key.rsplit(".", 1)
    return f"{prefix}.hook_{name}"


def state_key(hook: str, points) -> str | None:
    """The state tensor a per-step hook point carries (``core.0.hook_h`` -> ``core.0.h``), or None."""
    if points[hook].layout != "step":
        return None
    prefix, name = hook.rsplit(".", 1)
    return f"{prefix}.{name.removeprefix('hook_')}"


__all__ = [
    "KINDS",
    "STEP_KEY",
    "All",
    "Call",
    "Channels",
    "Coordinates",
    "Direction",
    "Editor",
    "Intervention",
    "Mask",
    "Sites",
    "Units",
    "active_rows",
    "edit_coordinates",
    "parse_edits",
    "parse_intervention",
    "parse_selection",
    "state_hook",
    "state_key",
]
