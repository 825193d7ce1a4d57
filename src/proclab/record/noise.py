"""Action noise: a fixed transform of the policy logits that diversifies recorded behaviour.

interpreting-rl-behavior recorded its dataset with a deliberately perturbed policy (spec §3):
logits x 0.7, clamped to [-1.8, 0.8], the logits of actions 9-14 set to -3 and of action 7
("right") to 0.1, then sampled. Here that is the preset ``seed`` of a small language of
operations applied left to right::

    scale=S          multiply every logit by S
    temp=T           divide every logit by T (a temperature)
    clamp=LO:HI      clamp every logit to [LO, HI]
    bias=ACTIONS:V   add V to the logits of ACTIONS
    set=ACTIONS:V    set the logits of ACTIONS to V

``ACTIONS`` is an action index (``7``) or an inclusive range (``9-14``); operations are
separated by commas. ``none`` (the default) leaves the policy alone. The recorder stores both
the clean and the transformed logits, so analyses can tell the agent's policy from the
behaviour policy (the seed kept only the noised one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from proclab.envs import NUM_ACTIONS
from proclab.errors import ProclabError

PRESETS = {"none": "", "seed": "scale=0.7,clamp=-1.8:0.8,set=9-14:-3,set=7:0.1"}
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_GRAMMAR = (
    "scale=S, temp=T, clamp=LO:HI, bias=A[-B]:V, set=A[-B]:V (comma-separated), or a preset: none, seed"
)


@dataclass(frozen=True)
class ActionNoise:
    """A parsed noise spec: ``(op, argument)`` pairs applied in order."""

    ops: tuple[tuple[str, tuple[float, ...]], ...] = ()

    @classmethod
    def parse(cls, spec: str, num_actions: int = NUM_ACTIONS) -> ActionNoise:
        text = PRESETS.get(spec.strip(), spec.strip())
        ops = []
        for part in filter(None, (p.strip() for p in text.split(","))):
            ops.append(_parse_op(part, spec, num_actions))
        return cls(tuple(ops))

    def __bool__(self) -> bool:
        return bool(self.ops)

    def spec(self) -> str:
        """The canonical text of this noise (``none`` when empty)."""
        parts = []
        for op, arg in self.ops:
            if op in ("scale", "temp"):
                parts.append(f"{op}={arg[0]:g}")
            elif op == "clamp":
                parts.append(f"clamp={arg[0]:g}:{arg[1]:g}")
            else:
                lo, hi, v = int(arg[0]), int(arg[1]), arg[2]
                parts.append(f"{op}={lo if lo == hi else f'{lo}-{hi}'}:{v:g}")
        return ",".join(parts) or "none"

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        """The transformed logits ``(..., A)`` (a new tensor)."""
        out = logits.clone()
        for op, arg in self.ops:
            if op == "scale":
                out = out * arg[0]
            elif op == "temp":
                out = out / arg[0]
            elif op == "clamp":
                out = out.clamp(arg[0], arg[1])
            elif op == "bias":
                out[..., int(arg[0]) : int(arg[1]) + 1] += arg[2]
            else:  # set
                out[..., int(arg[0]) : int(arg[1]) + 1] = arg[2]
        return out


def _parse_op(part: str, spec: str, num_actions: int) -> tuple[str, tuple[float, ...]]:
    def bad(why: str) -> ProclabError:
        return ProclabError(f"action noise {spec!r}: {why}; valid: {_GRAMMAR}")

    op, _, arg = part.partition("=")
    op = op.strip()
    if op in ("scale", "temp"):
        if not re.fullmatch(_NUM, arg.strip()) or (op == "temp" and float(arg) <= 0):
            raise bad(f"{part!r} needs a number{' > 0' if op == 'temp' else ''}")
        return op, (float(arg),)
    if op == "clamp":
        m = re.fullmatch(rf"\s*({_NUM})\s*:\s*({_NUM})\s*", arg)
        if not m or float(m.group(1)) > float(m.group(2)):
            raise bad(f"{part!r} needs LO:HI with LO <= HI")
        return op, (float(m.group(1)), float(m.group(2)))
    if op in ("bias", "set"):
        m = re.fullmatch(rf"\s*(\d+)(?:\s*-\s*(\d+))?\s*:\s*({_NUM})\s*", arg)
        if not m:
            raise bad(f"{part!r} needs ACTIONS:VALUE, e.g. 9-14:-3")
        lo = int(m.group(1))
        hi = int(m.group(2) or lo)
        if not lo <= hi < num_actions:
            raise bad(f"actions {lo}-{hi} in {part!r} are not within 0-{num_actions - 1}")
        return op, (lo, hi, float(m.group(3)))
    raise bad(f"unknown operation {op!r}")
