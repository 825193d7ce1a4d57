r"""Interventions on hidden-state directions: an agent whose state updates are edited in a basis.

At every step the core's state tensor (``--state``, e.g. ``core.0.h``) changes by
``delta = h_t - h_{t-1}`` (``h_{t-1} = 0`` after a reset). With ``c`` the basis coordinates of
``delta`` (:meth:`~proclab.interpret.bases.pca_ica.Basis.increment_coords`, ``--basis pca|ica``) and
``d_m`` the basis directions (``d P = I``), an :class:`Intervention` maps ``c`` to ``c'``:

* ``move I:J``     ``c'_J += c_I`` then ``c'_I = 0`` with ``I != J`` (the interpreting-rl-behavior
  "swap from I to J"; ``I:I`` leaves ``c`` as it is);
* ``collapse I``   ``c'_I = 0``;
* ``exchange I:J`` ``c'_I, c'_J = c_J, c_I``.

The new increment is ``delta' = delta + sum_m (c'_m - c_m) d_m`` and ``h'_t = h_{t-1} + delta'``:
the part of ``delta`` outside the directions' span (the residual) is untouched, and since
``d P = I`` the coordinates of ``delta'`` are exactly ``c'``. The edited ``h'_t`` is what the
step's heads read *and* what is carried to the next step. The seed's version re-added the
amount along the *from* direction and returned ``delta`` instead of the state; both are fixed
here by construction (tests check the coordinates and residual of every increment).

A :class:`Hold` edits the state itself instead: coordinate ``I`` of ``h'_t`` is set to one value
at every step (:class:`HeldAgent`, through :func:`~proclab.interpret.bases.coordinates.hold`), the
on-data arms of :mod:`proclab.interpret.interventions.arms`. ``collapse I`` is the hold at the start state's
coordinate: with every increment's coordinate zero, the state's never leaves its start value.

Both are :class:`EditedAgent`\ s: they keep the Agent API (``initial_state``, ``step``, ``unroll``,
``state_shapes``, hook points), so evaluation, recording and world-model simulation run them
unchanged. The edit is applied at the core's per-step hook point of that tensor, which fires
inside the core's time loop: ``unroll`` over ``T`` steps with resets equals ``T`` calls of
``step``, as for the plain agent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.bases.coordinates import Coordinates, hold
from proclab.interpret.interventions.spec import sample_shapes
from proclab.models import Agent, AgentOutput
from proclab.models.hooks import patch

OPS = ("move", "collapse", "exchange")


@dataclass(frozen=True)
class Intervention:
    """One edit of the increment's coordinates: ``op`` on coordinate ``i`` (and ``j``)."""

    op: str
    i: int
    j: int | None = None

    @classmethod
    def parse(cls, op: str, text: str) -> Intervention:
        """``("move", "3:5")``, ``("collapse", "3")``, ``("exchange", "3:5")`` -> an intervention."""
        if op not in OPS:
            raise unknown_choice("intervention", op, OPS)
        pattern = r"(\d+)" if op == "collapse" else r"(\d+):(\d+)"
        m = re.fullmatch(pattern, text.strip())
        if m is None:
            form = "I" if op == "collapse" else "I:J"
            raise ProclabError(
                f"--{op} {text!r}: expected {form} with non-negative integers (e.g. --{op} "
                f"{'3' if op == 'collapse' else '3:5'})"
            )
        return cls(op, int(m.group(1)), int(m.group(2)) if op != "collapse" else None)

    @property
    def spec(self) -> str:
        return f"{self.op} {self.i}" if self.j is None else f"{self.op} {self.i}:{self.j}"

    @property
    def identity(self) -> bool:
        return self.op != "collapse" and self.i == self.j

    @property
    def coordinates(self) -> tuple[int, ...]:
        """The coordinates the edit changes."""
        return (self.i,) if self.j is None or self.j == self.i else (self.i, self.j)

    def check(self, k: int) -> None:
        """Both coordinates must exist in a basis of ``k`` directions."""
        for c in (self.i, self.j):
            if c is not None and not 0 <= c < k:
                raise ProclabError(f"--{self.op}: coordinate {c} is outside the basis' directions 0-{k - 1}")

    def apply(self, c: Tensor) -> Tensor:
        """Coordinates ``(..., k)`` -> the edited ``c'`` (a new tensor)."""
        out = c.clone()
        ci = c[..., self.i]
        if self.op == "collapse":
            out[..., self.i] = 0
        elif self.op == "move":
            out[..., self.i] = 0
            out[..., self.j] = out[..., self.j] + ci
        else:
            out[..., self.i] = c[..., self.j]
            out[..., self.j] = ci
        return out


HOLD_ARMS = ("mean", "p05", "p95")
"""The sweep's arms that hold one value for every episode (resample draws per episode: sweep only)."""


@dataclass(frozen=True)
class Hold:
    """Coordinate ``i`` of the state (not of its increments) held at the value of arm ``arm``
    (:mod:`proclab.interpret.interventions.arms`) at every step."""

    i: int
    arm: str

    @classmethod
    def parse(cls, text: str) -> Hold:
        """``"3:mean"`` -> hold coordinate 3 at its recorded mean."""
        m = re.fullmatch(r"(\d+):(\w+)", text.strip())
        if m is None or m.group(2) not in HOLD_ARMS:
            raise ProclabError(
                f"--hold {text!r}: expected I:ARM with ARM one of {', '.join(HOLD_ARMS)} (e.g. --hold 3:mean; "
                "resample-ablation draws per episode: use --sweep --arms resample --directions I)"
            )
        return cls(int(m.group(1)), m.group(2))

    @property
    def spec(self) -> str:
        return f"hold {self.i}:{self.arm}"

    @property
    def coordinates(self) -> tuple[int, ...]:
        return (self.i,)

    def check(self, k: int) -> None:
        if not 0 <= self.i < k:
            raise ProclabError(f"--hold: coordinate {self.i} is outside the basis' directions 0-{k - 1}")


class EditedAgent:
    """``agent`` whose state tensor ``key`` is replaced at every step by :meth:`edit` of it.

    The edit runs at the core's per-step hook point of that tensor, so the edited state is what
    the step's heads read and what the next step starts from. Everything but ``step``/``unroll``
    is the wrapped agent's (``state_shapes``, ``config``, its hook points, ``eval``, ...), so code
    that inspects an agent sees the same one.
    """

    def __init__(self, agent, key: str, dim: int):
        shapes = agent.state_shapes()
        if key not in shapes:
            raise unknown_choice("state tensor", key, shapes)
        width = int(torch.Size(shapes[key]).numel())
        if dim != width:
            raise ProclabError(
                f"the basis has {dim} dimensions but state {key!r} has {width}; fit the basis "
                f"on that state (analyze hidden --state state_out/{key})"
            )
        self.agent, self.key = agent, key
        prefix, name = key.rsplit(".", 1)
        self.hook = f"{prefix}.hook_{name}"

    def __getattr__(self, name: str):
        if name == "agent":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.agent, name)

    def edit(self, h: Tensor, prev: Tensor, first: Tensor) -> Tensor:
        """``h'_t`` from the plain ``h_t`` and the carried ``h_{t-1}`` (both ``(B, D)``; zero after a
        reset, where ``first`` is set)."""
        raise NotImplementedError

    def unroll(
        self, obs: Tensor, state: Mapping[str, Tensor], firsts: Tensor, prev_rewards: Tensor | None = None
    ) -> tuple[AgentOutput, dict[str, Tensor]]:
        """The wrapped agent's ``unroll`` with every step's state ``key`` edited."""
        carried = {"prev": state[self.key], "t": 0}
        firsts = firsts.bool()
        shape = self.agent.state_shapes()[self.key]

        def fn(h: Tensor) -> Tensor:
            t = carried["t"]
            keep = (~firsts[t]).to(h.dtype).view(-1, *([1] * len(shape)))
            prev = carried["prev"].to(h.dtype) * keep
            out = self.edit(h.reshape(h.shape[0], -1), prev.reshape(h.shape[0], -1), firsts[t]).view_as(h)
            carried["prev"], carried["t"] = out, t + 1
            return out

        with patch(self.agent, self.hook, fn):
            return self.agent.unroll(obs, state, firsts, prev_rewards)

    step = Agent.step  # one step is this ``unroll`` with ``T = 1``, exactly as for the plain agent
    __call__ = unroll


class IntervenedAgent(EditedAgent):
    """``agent`` with ``intervention`` applied to the increments of state tensor ``key`` (see the module
    docstring). ``basis`` (fitted on that tensor) gives the coordinates, ``kind`` picks pca or ica."""

    def __init__(self, agent, basis, kind: str, intervention: Intervention, key: str):
        super().__init__(agent, key, basis.dim)
        directions = torch.as_tensor(basis.directions(kind))
        intervention.check(directions.shape[0])
        self.basis, self.kind, self.intervention = basis, kind, intervention

    def edit(self, h: Tensor, prev: Tensor, first: Tensor) -> Tensor:
        c = self.basis.increment_coords(h - prev, self.kind)
        return h + self.basis.along(self.intervention.apply(c) - c, self.kind)


HOOK = "hook:"


def held_agent(agent, coords: Coordinates, key: str):
    """The agent that holds ``coords`` of ``key``: a state tensor (:class:`HeldAgent`) or ``hook:NAME``, any
    other hook point (:class:`HookHeldAgent`, for feed-forward agents' torso and fc layers too)."""
    if key.startswith(HOOK):
        return HookHeldAgent(agent, coords, key.removeprefix(HOOK))
    return HeldAgent(agent, coords, key)


class HookHeldAgent:
    """:class:`HeldAgent`'s hold at a hook point that is not a carried state: on every forward pass, row
    ``r`` of the activation (flattened per sample to ``coords.dim`` floats) gets coordinate ``dims[r]``
    held at ``values[r]`` (:func:`~proclab.interpret.bases.coordinates.hold`). Nothing is carried, so the
    edit acts on each step's activation alone."""

    def __init__(self, agent, coords: Coordinates, hook: str):
        shape = sample_shapes(agent).get(hook)
        if shape is None:
            raise unknown_choice("hook point", hook, sample_shapes(agent))
        width = int(torch.Size(shape).numel())
        if width != coords.dim:
            raise ProclabError(f"the basis has {coords.dim} dimensions but hook {hook!r} has {width}")
        self.agent, self.coords, self.hook, self.width = agent, coords, hook, width
        self.dims: Tensor | None = None
        self.values: Tensor | None = None

    def __getattr__(self, name: str):
        if name == "agent":
            raise AttributeError(name)
        return getattr(self.agent, name)

    def plan(self, dims: Tensor, values: Tensor) -> HookHeldAgent:
        """As :meth:`HeldAgent.plan`: per row (or for all rows) the coordinate held (``-1``: none) and its value."""
        if int(dims.max()) >= self.coords.k:
            raise ProclabError(
                f"coordinate {int(dims.max())} is outside the basis' directions 0-{self.coords.k - 1}"
            )
        self.dims, self.values = dims, values
        return self

    def _edit(self, act: Tensor) -> Tensor:
        rows = act.reshape(-1, self.width)
        n = len(rows)
        dims, values = self.dims.to(act.device), self.values.to(device=act.device, dtype=act.dtype)
        if dims.dim() == 0:
            dims, values = dims.expand(n), values.expand(n)
        elif n != len(dims):  # time-major hooks of an unroll: T rows per episode row
            dims, values = dims.repeat(n // len(dims)), values.repeat(n // len(values))
        return hold(self.coords, rows, dims, values).reshape(act.shape)

    def unroll(self, obs, state, firsts, prev_rewards=None):
        if self.dims is None or self.values is None:
            raise RuntimeError("HookHeldAgent.plan(dims, values) must be called before stepping")
        with patch(self.agent, self.hook, self._edit):
            return self.agent.unroll(obs, state, firsts, prev_rewards)

    def step(self, obs, state, first, prev_reward=None):
        if self.dims is None or self.values is None:
            raise RuntimeError("HookHeldAgent.plan(dims, values) must be called before stepping")
        with patch(self.agent, self.hook, self._edit):
            return self.agent.step(obs, state, first, prev_reward)

    __call__ = unroll


class HeldAgent(EditedAgent):
    """``agent`` with, in row ``r`` of every step's state ``key``, coordinate ``dims[r]`` of ``coords``
    held at ``values[r]`` (:func:`~proclab.interpret.bases.coordinates.hold`; rows with ``dims[r] < 0`` play
    the plain agent). :meth:`plan` sets them before a step: a batched sweep gives every row its own
    direction and value; 0-d ``dims`` and ``values`` hold one coordinate at one value in every row."""

    def __init__(self, agent, coords: Coordinates, key: str):
        super().__init__(agent, key, coords.dim)
        self.coords = coords
        self.dims: Tensor | None = None
        self.values: Tensor | None = None

    def plan(self, dims: Tensor, values: Tensor) -> HeldAgent:
        """The next steps' edit: per row (or for all rows), the coordinate held (``-1``: none) and its value."""
        if int(dims.max()) >= self.coords.k:
            raise ProclabError(
                f"coordinate {int(dims.max())} is outside the basis' directions 0-{self.coords.k - 1}"
            )
        self.dims, self.values = dims, values
        return self

    def edit(self, h: Tensor, prev: Tensor, first: Tensor) -> Tensor:
        if self.dims is None or self.values is None:
            raise RuntimeError("HeldAgent.plan(dims, values) must be called before stepping")
        n = len(h)
        dims = self.dims.to(h.device).expand(n) if self.dims.dim() == 0 else self.dims.to(h.device)
        values = self.values.to(device=h.device, dtype=h.dtype)
        return hold(self.coords, h, dims, values.expand(n) if values.dim() == 0 else values)
