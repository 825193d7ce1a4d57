r"""Edits of basis directions, as :class:`~proclab.models.interventions.Intervention`\ s of the agent.

At every step the core's state tensor (``--state``, e.g. ``core.0.h``) changes by
``delta = h_t - h_{t-1}`` (``h_{t-1} = 0`` after a reset). With ``c`` the basis coordinates of
``delta`` (:meth:`~proclab.interpret.bases.pca_ica.Basis.increment_coords`, ``--basis pca|ica``) and
``d_m`` the basis directions (``d P = I``), a :class:`DirectionEdit` maps ``c`` to ``c'``:

* ``move I:J``     ``c'_J += c_I`` then ``c'_I = 0`` with ``I != J`` (the interpreting-rl-behavior
  "swap from I to J"; ``I:I`` leaves ``c`` as it is);
* ``collapse I``   ``c'_I = 0``;
* ``exchange I:J`` ``c'_I, c'_J = c_J, c_I``.

The new increment is ``delta' = delta + sum_m (c'_m - c_m) d_m`` and ``h'_t = h_{t-1} + delta'``:
the part of ``delta`` outside the directions' span (the residual) is untouched, and since
``d P = I`` the coordinates of ``delta'`` are exactly ``c'``. The edited ``h'_t`` is what the
step's heads read *and* what is carried to the next step. The seed's version re-added the
amount along the *from* direction and returned ``delta`` instead of the state; both are fixed
here by construction (an increment edit of :mod:`proclab.models.interventions`, ``of="increment"``).

A :class:`Hold` edits the state itself instead: coordinate ``I`` of ``h'_t`` is set to one value
at every step, the on-data arms of :mod:`proclab.interpret.interventions.arms`. ``collapse I`` is the
hold at the start state's coordinate: with every increment's coordinate zero, the state's never
leaves its start value.

Both are played by the one agent wrapper, :class:`~proclab.models.edited.Intervened`, at the
hook point of the tensor the basis describes (:func:`edit_hook`): a carried state's per-step hook
point, which fires inside the core's time loop (so ``unroll`` over ``T`` steps with resets equals
``T`` calls of ``step``), or ``hook:NAME``, any other hook point (holds only: nothing is carried).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.bases.activations import HOOK
from proclab.models.interventions import Coordinates, Intervention, state_hook

OPS = ("move", "collapse", "exchange")
KIND_OF_OP = {"move": "move", "collapse": "set", "exchange": "swap"}


def edit_hook(key: str) -> str:
    """The hook point an edit of ``key`` acts at: a state tensor's per-step hook (``core.0.h`` ->
    ``core.0.hook_h``), or the hook point ``hook:NAME`` names."""
    return key.removeprefix(HOOK) if key.startswith(HOOK) else state_hook(key)


@dataclass(frozen=True)
class DirectionEdit:
    """One edit of the increment's coordinates: ``op`` on coordinate ``i`` (and ``j``)."""

    op: str
    i: int
    j: int | None = None

    @classmethod
    def parse(cls, op: str, text: str) -> DirectionEdit:
        """``("move", "3:5")``, ``("collapse", "3")``, ``("exchange", "3:5")`` -> an edit."""
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
    def coordinates(self) -> tuple[int, ...]:
        """The coordinates the edit changes."""
        return (self.i,) if self.j is None or self.j == self.i else (self.i, self.j)

    def check(self, k: int) -> None:
        """Both coordinates must exist in a basis of ``k`` directions."""
        for c in (self.i, self.j):
            if c is not None and not 0 <= c < k:
                raise ProclabError(f"--{self.op}: coordinate {c} is outside the basis' directions 0-{k - 1}")

    def intervention(self, coords, key: str) -> Intervention:
        """The edit of the increments of state ``key`` in ``coords`` (a carried state only)."""
        if key.startswith(HOOK):
            raise ProclabError(
                f"--{self.op} edits a carried state's increments; the folder's basis is at {key}: use --hold "
                "I:ARM, or analyze edit --hook NAME --edit SPEC"
            )
        self.check(coords.k)
        kind = KIND_OF_OP[self.op]
        return Intervention(edit_hook(key), Coordinates(coords, self.i, self.j), kind, 0.0, of="increment")


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
                "resample-ablation draws per episode: use analyze sweep --arms resample --directions I)"
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

    def intervention(self, coords, key: str, value: float) -> Intervention:
        """Coordinate ``i`` of ``key`` (a state tensor or ``hook:NAME``) held at ``value`` at every step."""
        self.check(coords.k)
        return Intervention(edit_hook(key), Coordinates(coords, self.i), "set", float(value))
