"""What a saliency map explains: the target grammar and the scalar each target reads off an agent trace.

A target is one scalar per sample at the target step ``k``, computed from the agent's outputs
and activations there (:class:`AgentTrace`, filled by a world-model simulation or by replaying
the agent on real frames). Grammar of ``--target`` (repeatable; ranges expand to one target each):

=====================  ====================================================================
``value``              ``V(obs_k)``
``value-delta``        ``V(obs_k) - V(obs_{k-1})`` (needs ``k >= 1``)
``action``             log-probability of the action *taken* at ``k``: positive saliency is
                       evidence *for* that action (the seed took the max log-prob with the
                       wrong sign)
``action:NAME``        log-probability of one action (``right``, ``up-right``, ... or its index)
``group:DIR``          ``logsumexp`` of the log-probabilities of every action with a ``DIR``
                       component (``left``, ``right``, ``up``, ``down``); ``group:left`` is
                       the seed's "leftwards"
``ic:K`` ``pc:K``      coordinate ``K`` of the basis activation in IC / PC space;
                       ``ic:0-15`` expands to 16 targets
``hook:NAME[:I]``      hooked activation ``NAME`` at step ``k``: its flat element ``I``, or
                       the sum of its elements without ``I``
=====================  ====================================================================
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from proclab.envs.actions import ACTION_NAMES, ACTIONS
from proclab.errors import ProclabError
from proclab.models.cores.base import full_precision

GROUPS: dict[str, tuple[int, ...]] = {
    "left": tuple(a.index for a in ACTIONS if a.dx < 0),
    "right": tuple(a.index for a in ACTIONS if a.dx > 0),
    "up": tuple(a.index for a in ACTIONS if a.dy > 0),
    "down": tuple(a.index for a in ACTIONS if a.dy < 0),
}
DEFAULT_TARGETS = ("value", "action")
KINDS = ("value", "value-delta", "action", "action:NAME", "group:DIR", "ic:K", "pc:K", "hook:NAME[:I]")


@dataclass(frozen=True)
class Target:
    """One parsed target; ``spec`` is its canonical text (``ic:3``, ``action:right``)."""

    kind: str
    spec: str
    index: int | None = None
    actions: tuple[int, ...] = ()
    hook: str | None = None

    @property
    def key(self) -> str:
        """The spec as a store field / file name component (``ic_3``, ``group_left``)."""
        return self.spec.replace(":", "_")

    @property
    def needs_basis(self) -> bool:
        return self.kind in ("ic", "pc")


def _int(text: str, what: str, spec: str) -> int:
    if not re.fullmatch(r"\d+", text):
        raise ProclabError(f"target {spec!r}: {what} must be a non-negative integer, got {text!r}")
    return int(text)


def parse_target(spec: str, num_actions: int = len(ACTIONS)) -> list[Target]:
    """One ``--target`` value -> the targets it names (ranges expand)."""
    head, _, rest = spec.partition(":")
    if spec in ("value", "value-delta", "action"):
        return [Target(spec, spec)]
    if head == "action" and rest:
        if rest in ACTION_NAMES[:num_actions]:
            index = ACTION_NAMES.index(rest)
        elif re.fullmatch(r"\d+", rest) and int(rest) < num_actions:
            index = int(rest)
        else:
            raise ProclabError(
                f"unknown action {rest!r} in target {spec!r}; valid: "
                f"{', '.join(ACTION_NAMES[:num_actions])} or 0-{num_actions - 1}"
            )
        return [Target("action", f"action:{ACTION_NAMES[index]}", index=index)]
    if head == "group":
        if rest not in GROUPS:
            raise ProclabError(
                f"unknown action group {rest!r} in target {spec!r}; valid: {', '.join(GROUPS)}"
            )
        return [Target("group", spec, actions=GROUPS[rest])]
    if head in ("ic", "pc") and rest:
        lo, dash, hi = rest.partition("-")
        first = _int(lo, "the coordinate", spec)
        last = _int(hi, "the range end", spec) if dash else first
        if last < first:
            raise ProclabError(f"target {spec!r}: empty range (write low-high, e.g. {head}:0-15)")
        return [Target(head, f"{head}:{i}", index=i) for i in range(first, last + 1)]
    if head == "hook" and rest:
        name, colon, index = rest.partition(":")
        i = _int(index, "the element index", spec) if colon else None
        return [Target("hook", spec, index=i, hook=name)]
    raise ProclabError(f"unknown saliency target {spec!r}; valid forms: {', '.join(KINDS)}")


def parse_targets(specs: Sequence[str], num_actions: int = len(ACTIONS)) -> list[Target]:
    """Every ``--target`` value parsed and expanded, duplicates dropped, order kept."""
    out: dict[str, Target] = {}
    for spec in specs:
        for target in parse_target(spec.strip(), num_actions):
            out.setdefault(target.spec, target)
    if not out:
        raise ProclabError("no saliency target given; pass --target value (or action, ic:0-15, ...)")
    return list(out.values())


@dataclass
class AgentTrace:
    """The agent's outputs and activations over ``S`` steps of a batch of ``B`` samples.

    ``hooks[name][k]`` is hook point ``name``'s value at step ``k`` flattened to ``(B, -1)``;
    ``basis_input[k]`` the activation the basis was fitted on at step ``k`` (``(B, D)``).
    """

    logits: Tensor
    """``(S, B, A)``."""
    value: Tensor
    """``(S, B)``."""
    taken: Tensor
    """``(S, B)`` int: the action the agent took at each step."""
    hooks: dict[str, list[Tensor]] = field(default_factory=dict)
    basis_input: list[Tensor] | None = None


def evaluate(target: Target, trace: AgentTrace, step: int, basis=None) -> Tensor:
    """The target's value at ``step`` for every sample: ``(B,)``, differentiable, float32 or wider."""
    if target.kind == "value":
        return full_precision(trace.value[step])
    if target.kind == "value-delta":
        if step < 1:
            raise ProclabError("target 'value-delta' needs --step >= 1 (it compares with the previous step)")
        return full_precision(trace.value[step] - trace.value[step - 1])
    if target.kind in ("action", "group"):
        logp = full_precision(trace.logits[step]).log_softmax(-1)
        if target.kind == "group":
            return torch.logsumexp(logp[:, list(target.actions)], -1)
        if target.index is None:
            return logp.gather(-1, trace.taken[step].long().unsqueeze(-1)).squeeze(-1)
        return logp[:, target.index]
    if target.kind in ("ic", "pc"):
        if basis is None or trace.basis_input is None:
            raise ProclabError(f"target {target.spec!r} needs the basis: run `proclab analyze hidden` first")
        x = full_precision(trace.basis_input[step])
        coords = basis.to_ics(x) if target.kind == "ic" else basis.to_pcs(x)
        if target.index >= coords.shape[-1]:
            raise ProclabError(
                f"target {target.spec!r}: the basis has {coords.shape[-1]} {target.kind.upper()}s "
                f"(0-{coords.shape[-1] - 1})"
            )
        return coords[:, target.index]
    values = full_precision(trace.hooks[target.hook][step])
    if target.index is None:
        return values.sum(-1)
    if target.index >= values.shape[-1]:
        raise ProclabError(
            f"target {target.spec!r}: hook {target.hook!r} has {values.shape[-1]} elements per step"
        )
    return values[:, target.index]
