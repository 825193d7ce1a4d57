"""Named hook points on every activation, and two context managers to read or replace them.

Interpretability work (saliency, direction swapping, causal patching) needs to read and
overwrite *any* intermediate activation by a stable name. Forward hooks on arbitrary modules
are brittle: functional ReLUs cannot be hooked and a module's output is not always the
activation one means. So, as in TransformerLens, the agents place an identity
:class:`HookPoint` module at every activation worth naming; its module path (for example
``torso.block0.hook_pool`` or ``core.1.hook_W_y``) is the activation's name, and a forward
hook on it sees the activation and may return a replacement.

Each hook point knows how its calls are laid out (``HookPoint.layout``):

* ``flat``: the torso's hooks see images flattened over time, ``(T*B, ...)``;
* ``time``: from ``hook_features`` on, activations are time-major ``(T, B, ...)``;
* ``step``: a recurrent core's state fires once per time step with ``(B, ...)``.

:func:`capture` records the raw calls (the layer below caches and edits);
:func:`proclab.models.edited.run_with_cache` turns them into ``(T, B, ...)`` for every
hook, whatever its layout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn

from proclab.errors import unknown_choice

LAYOUTS = ("flat", "time", "step")


class HookPoint(nn.Module):
    """Identity module marking a named activation; forward hooks read it or return a replacement.

    ``layout`` says how a call's activation is laid out (module docstring): ``time`` unless the
    agent marks it ``flat`` (the torso's) or the core ``step`` (its state, once per time step)."""

    def __init__(self, layout: str = "time"):
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"hook point layout {layout!r} is not one of {LAYOUTS}")
        self.layout = layout
        self.name = ""  # its path in the agent, set when the agent lists its hook points

    @property
    def per_step(self) -> bool:
        """Fires once per time step inside a core's loop."""
        return self.layout == "step"

    def forward(self, x: Tensor) -> Tensor:
        return x

    def extra_repr(self) -> str:
        return "" if self.layout == "time" else f"layout={self.layout}"


def device_of(module: nn.Module) -> torch.device:
    """Where ``module`` computes: its first weight's device (CPU for a module without weights, such as a
    scripted or planted agent)."""
    return next((p.device for p in module.parameters()), torch.device("cpu"))


def hook_points(module: nn.Module) -> dict[str, HookPoint]:
    """Every :class:`HookPoint` below ``module``, by module path, in forward order."""
    return {name: m for name, m in module.named_modules() if isinstance(m, HookPoint)}


def _resolve(module: nn.Module, names: Iterable[str] | str | None) -> dict[str, HookPoint]:
    points = hook_points(module)
    if names is None:
        return points
    if isinstance(names, str):
        names = [names]
    chosen = {}
    for name in names:
        if name not in points:
            raise unknown_choice("hook point", name, points)
        chosen[name] = points[name]
    return chosen


class Activations(Mapping[str, Tensor]):
    """What :func:`capture` recorded: ``acts[name]`` is a tensor, ``acts.calls(name)`` the raw calls."""

    def __init__(self, points: dict[str, HookPoint]):
        self._points = points
        self._calls: dict[str, list[Tensor]] = {name: [] for name in points}

    def _record(self, name: str, value: Tensor) -> None:
        self._calls[name].append(value)

    def calls(self, name: str) -> list[Tensor]:
        """The hook point's output at each call, in order."""
        return self._calls[name]

    def __getitem__(self, name: str) -> Tensor:
        calls = self._calls[name]
        if not calls:
            raise KeyError(f"hook point {name!r} did not fire inside the capture block")
        if self._points[name].per_step:
            return torch.stack(calls)
        return calls[0] if len(calls) == 1 else torch.cat(calls)

    def __iter__(self) -> Iterator[str]:
        return (name for name, calls in self._calls.items() if calls)

    def __len__(self) -> int:
        return sum(1 for calls in self._calls.values() if calls)


@contextmanager
def capture(
    module: nn.Module, names: Iterable[str] | str | None = None, detach: bool = False
) -> Iterator[Activations]:
    """Record the named activations (all hook points if ``names`` is None) inside the block.

    With ``detach=False`` (default) the recorded tensors keep their autograd graph, so
    gradients with respect to an activation can be taken (saliency); pass ``detach=True``
    to record values only. A capture opened inside a :func:`patch` of the same hook point
    records the patched value; one opened outside it records the original.
    """
    points = _resolve(module, names)
    acts = Activations(points)
    handles = []
    try:
        for name, point in points.items():

            def hook(_mod, _inp, out, name=name):
                acts._record(name, out.detach() if detach else out)

            handles.append(point.register_forward_hook(hook))
        yield acts
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def patch(module: nn.Module, name: str, fn: Callable[[Tensor], Tensor]) -> Iterator[None]:
    """Replace activation ``name`` by ``fn(activation)`` inside the block (nest to patch several).

    ``fn`` must return a tensor of the same shape; for a per-step hook point (a core's state)
    it is called once per time step with that step's ``(B, ...)`` tensor.
    """
    point = _resolve(module, [name])[name]

    def hook(_point: HookPoint, _inputs: tuple[Any, ...], activation: Tensor) -> Tensor:
        return fn(activation)

    handle = point.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()
