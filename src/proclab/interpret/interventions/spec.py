"""Edits at any named hook point, declared as data: which hook, which part of it, what to do there.

An :class:`Edit` names a hook point of the agent (``torso.block1.hook_out``, ``torso.hook_fc``,
``core.0.hook_h``; :meth:`~proclab.models.agent.Agent.hook_names` lists them), a *selection* of the
activation, an edit *kind* and its value, in the spirit of pyvene's intervention configs. It is
applied through :func:`proclab.models.hooks.patch`, so no module offsets are written by hand.

Selections (the activation of one sample has shape ``(C, H, W)`` for a conv map, ``(D,)`` for a
flat hook; see :func:`sample_shapes`):

* ``all``: the whole activation;
* ``channel C``: one channel of a conv map (every position), or one unit of a flat hook;
* ``site C@Y,X``: one channel at one position of a conv map;
* ``units I,J,...``: a set of units of a flat hook (a recurrent state, ``torso.hook_fc``);
* ``direction``: the component along a vector ``d`` across channels, at every position of a conv
  map (or of the whole vector of a flat hook).

Kinds: ``set`` (to ``value``), ``add`` (``value``; for a direction: ``value * d``, unnormalised,
which is how a steering vector is added at a coefficient), ``scale`` (by ``value``), ``mean``
(mean-ablation: to ``source``, the activation's mean), ``resample`` (to a row of ``source`` drawn
at random per sample and call, a pool of recorded activations), ``patch`` (to ``source``: the
activation of a forward pass on another input, one row per sample or one for all). For a
direction, ``set``/``scale``/``mean``/``resample``/``patch`` act on the component along ``d``
only: the part of the activation orthogonal to ``d`` is kept. A direction from a basis fitted at
that hook is a direction like any other (:func:`basis_direction`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import torch
from torch import Tensor

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.bases.activations import agent_device
from proclab.models.hooks import capture, hook_points, patch

SELECTIONS = ("all", "channel", "site", "units", "direction")
KINDS = {
    "set": "set to VALUE",
    "add": "add VALUE (a direction: VALUE times the vector)",
    "scale": "multiply by VALUE",
    "mean": "mean-ablation: replace by the recorded mean",
    "resample": "resample-ablation: replace by a recorded activation drawn at random",
    "patch": "replace by the activation of a forward pass on another input",
}
NEEDS_SOURCE = ("mean", "resample", "patch")


@dataclass(frozen=True, eq=False)
class Edit:
    """One edit at one hook point (see the module docstring). ``source`` holds the activation(s)
    ``mean``/``resample``/``patch`` write: per-sample shape, or rows of it."""

    hook: str
    select: str = "all"
    kind: str = "set"
    value: float = 0.0
    channel: int | None = None
    y: int | None = None
    x: int | None = None
    units: tuple[int, ...] = ()
    direction: Tensor | None = None
    source: Tensor | None = None
    seed: int = 0
    generator: torch.Generator = field(default_factory=torch.Generator, repr=False)

    def __post_init__(self):
        if self.select not in SELECTIONS:
            raise unknown_choice("selection", self.select, SELECTIONS)
        if self.kind not in KINDS:
            raise unknown_choice("edit kind", self.kind, KINDS)
        if self.kind in NEEDS_SOURCE and self.source is None:
            raise ProclabError(f"a {self.kind} edit at {self.hook} needs the activation it writes (source)")
        if self.select == "direction" and self.direction is None:
            raise ProclabError(f"a direction edit at {self.hook} needs its vector")
        if self.select in ("channel", "site") and self.channel is None:
            raise ProclabError(f"a {self.select} edit at {self.hook} needs a channel")
        if self.select == "site" and (self.y is None or self.x is None):
            raise ProclabError(f"a site edit at {self.hook} needs its position Y,X")
        self.generator.manual_seed(self.seed)

    def describe(self) -> str:
        where = {
            "all": "all",
            "channel": f"channel {self.channel}",
            "site": f"site {self.channel}@{self.y},{self.x}",
            "units": f"units {','.join(map(str, self.units))}",
            "direction": "direction",
        }[self.select]
        value = f" {self.value:g}" if self.kind in ("set", "add", "scale") else ""
        return f"{self.hook} {where} {self.kind}{value}"

    # -- applying --------------------------------------------------------------------------------
    def mask(self, shape: Sequence[int]) -> Tensor:
        """Boolean mask over one sample's activation of ``shape`` selecting what the edit touches."""
        m = torch.zeros(tuple(shape), dtype=torch.bool)
        if self.select == "all":
            m[...] = True
        elif self.select == "channel":
            _check_index(self.channel, shape[0], "channel", self.hook)
            m[self.channel] = True
        elif self.select == "site":
            if len(shape) != 3:
                raise ProclabError(
                    f"a site edit needs a conv map; {self.hook} has per-sample shape {tuple(shape)}"
                )
            for v, n, what in (
                (self.channel, shape[0], "channel"),
                (self.y, shape[1], "y"),
                (self.x, shape[2], "x"),
            ):
                _check_index(v, n, what, self.hook)
            m[self.channel, self.y, self.x] = True
        else:  # units
            if len(shape) != 1:
                raise ProclabError(
                    f"a units edit needs a flat hook; {self.hook} has per-sample shape {tuple(shape)}"
                )
            for u in self.units:
                _check_index(u, shape[0], "unit", self.hook)
            m[list(self.units)] = True
        return m

    def apply(self, act: Tensor, sample: Sequence[int]) -> Tensor:
        """The edited activation: ``act`` has any leading dims followed by the per-sample ``sample`` shape."""
        lead = act.shape[: act.dim() - len(sample)]
        rows = act.reshape(-1, *sample)
        target = self._target(rows)
        if self.select == "direction":
            out = self._along(rows, target)
        else:
            m = self.mask(sample).to(rows.device)
            out = torch.where(m, target, rows)
        return out.reshape(*lead, *sample)

    def _target(self, rows: Tensor) -> Tensor | None:
        """The value each selected element gets (per row), for the mask selections; the source rows
        (per row) for a direction's source kinds."""
        if self.kind == "set":
            return torch.full_like(rows, self.value)
        if self.kind == "add":
            return rows + self.value
        if self.kind == "scale":
            return rows * self.value
        src = self.source.to(device=rows.device, dtype=rows.dtype)
        sample = rows.shape[1:]
        if self.kind == "resample":
            pool = src.reshape(-1, *sample)
            pick = torch.randint(0, len(pool), (len(rows),), generator=self.generator)
            return pool[pick.to(pool.device)]
        if src.shape == sample:
            return src.expand_as(rows)
        src = src.reshape(-1, *sample)
        if len(src) != len(rows):
            raise ProclabError(
                f"{self.kind} at {self.hook}: the source has {len(src)} rows, the activation {len(rows)}"
            )
        return src

    def _along(self, rows: Tensor, target: Tensor) -> Tensor:
        """Direction edits: act on the component along ``d`` over dim 1 (channels, or the vector)."""
        d = self.direction.to(device=rows.device, dtype=rows.dtype).reshape(-1)
        if len(d) != rows.shape[1]:
            raise ProclabError(
                f"the direction at {self.hook} has {len(d)} entries, the activation {rows.shape[1]} channels"
            )
        shape = (1, -1) + (1,) * (rows.dim() - 2)
        d = d.view(shape)
        if self.kind == "add":
            return rows + self.value * d
        unit = d / d.pow(2).sum().sqrt()
        comp = (rows * unit).sum(1, keepdim=True)
        if self.kind == "set":
            new = torch.full_like(comp, self.value)
        elif self.kind == "scale":
            new = comp * self.value
        else:
            new = (target * unit).sum(1, keepdim=True)
        return rows + (new - comp) * unit


def _check_index(v: int, n: int, what: str, hook: str) -> None:
    if not 0 <= v < n:
        raise ProclabError(f"{what} {v} is outside 0-{n - 1} at {hook}")


def sample_shapes(agent, obs_shape: Sequence[int] = (3, 64, 64)) -> dict[str, tuple[int, ...]]:
    """Per-sample shape of every hook point's activation, from one forward pass of 2 steps of 3 rows
    (torso hooks see 6 rows, time-major hooks ``(2, 3, ...)``, per-step hooks ``(3, ...)`` twice), on the
    agent's device."""
    dev = agent_device(agent)
    obs = torch.zeros((2, 3, *obs_shape), dtype=torch.uint8, device=dev)
    firsts = torch.ones((2, 3), dtype=torch.bool, device=dev)
    with_prev = getattr(getattr(agent, "config", None), "prev_reward", False)
    prev = torch.zeros((2, 3), device=dev) if with_prev else None
    with torch.no_grad(), capture(agent, detach=True) as acts:
        agent.unroll(obs, agent.initial_state(3, device=dev), firsts, prev)
    out = {}
    for name in acts:
        shape = tuple(acts.calls(name)[0].shape)
        out[name] = shape[2:] if shape[:2] == (2, 3) else shape[1:]
    return out


class HookedAgent:
    """``agent`` with ``edits`` applied at their hook points on every forward pass (step and unroll).

    Everything else is the wrapped agent's (``initial_state``, ``config``, its hook points), so
    evaluation and recording run it unchanged. An empty list of edits is the plain agent.
    """

    def __init__(self, agent, edits: Sequence[Edit]):
        self.agent, self.edits = agent, list(edits)
        names = hook_points(agent) if hasattr(agent, "named_modules") else {}
        for e in self.edits:
            if e.hook not in names:
                raise unknown_choice("hook point", e.hook, names)
        self.shapes = sample_shapes(agent) if self.edits else {}

    def __getattr__(self, name: str):
        if name == "agent":
            raise AttributeError(name)
        return getattr(self.agent, name)

    @contextmanager
    def active(self) -> Iterator[None]:
        with ExitStack() as stack:
            for e in self.edits:
                shape = self.shapes[e.hook]
                stack.enter_context(patch(self.agent, e.hook, lambda a, e=e, s=shape: e.apply(a, s)))
            yield

    def unroll(self, obs, state, firsts, prev_rewards=None):
        with self.active():
            return self.agent.unroll(obs, state, firsts, prev_rewards)

    def step(self, obs, state, first, prev_reward=None):
        with self.active():
            return self.agent.step(obs, state, first, prev_reward)

    __call__ = unroll


def donor_activation(agent, hook: str, obs: Tensor, state: Mapping[str, Tensor] | None = None) -> Tensor:
    """The activation at ``hook`` of one step on ``obs`` (``(B, 3, 64, 64)``, from ``state`` or a fresh
    one): the ``source`` of a ``patch`` edit, row for row."""
    b = len(obs)
    first = torch.full((b,), state is None, dtype=torch.bool)
    state = agent.initial_state(b) if state is None else state
    prev = torch.zeros(b) if getattr(getattr(agent, "config", None), "prev_reward", False) else None
    with torch.no_grad(), capture(agent, hook, detach=True) as acts:
        agent.step(obs, state, first, prev)
    act = acts[hook]
    return act.reshape(b, *act.shape[act.dim() - len(sample_shapes(agent)[hook]) :])


def basis_direction(directions, index: int) -> Tensor:
    """Row ``index`` of a basis' directions ``(k, D)`` fitted at a hook, as an edit's vector."""
    d = torch.as_tensor(directions, dtype=torch.float32)
    if not 0 <= index < len(d):
        raise ProclabError(f"direction {index} is outside the basis' 0-{len(d) - 1}")
    return d[index]


_SELECT = re.compile(
    r"(?P<sel>all|channel\s+(?P<c>\d+)|site\s+(?P<sc>\d+)@(?P<y>\d+),(?P<x>\d+)|units\s+(?P<u>\d+(?:,\d+)*))"
    r"\s+(?P<kind>\w+)(?:\s+(?P<value>[-+0-9.eE]+))?"
)


def parse_edit(hook: str, text: str, source: Tensor | None = None) -> Edit:
    """``--edit`` text -> an :class:`Edit` at ``hook``: ``"channel 7 set 0"``, ``"site 7@4,5 add 3"``,
    ``"units 1,2 scale 2"``, ``"all mean"``, ``"channel 3 resample"`` (directions come from a vector)."""
    m = _SELECT.fullmatch(text.strip())
    if m is None:
        raise ProclabError(
            f"--edit {text!r}: expected SELECTION KIND [VALUE], e.g. 'channel 7 set 0', 'site 7@4,5 add 3', "
            f"'units 1,2 scale 2', 'all mean'; kinds: {', '.join(KINDS)}"
        )
    kind = m.group("kind")
    if kind not in KINDS or kind == "patch":
        raise unknown_choice("edit kind", kind, [k for k in KINDS if k != "patch"])
    if (kind in ("set", "add", "scale")) != (m.group("value") is not None):
        raise ProclabError(f"--edit {text!r}: set/add/scale take a VALUE, mean/resample none")
    sel = m.group("sel").split()[0]
    return Edit(
        hook,
        sel,
        kind,
        float(m.group("value") or 0.0),
        channel=int(m.group("c") or m.group("sc")) if sel in ("channel", "site") else None,
        y=int(m.group("y")) if sel == "site" else None,
        x=int(m.group("x")) if sel == "site" else None,
        units=tuple(int(u) for u in m.group("u").split(",")) if sel == "units" else (),
        source=source,
    )
