"""Saliency through the world model: gradients of agent targets w.r.t. everything that produced them.

Simulated samples are stored without gradients, so a sample is **re-simulated** from its stored
bottleneck vector with the sample store's own settings (modal latents, greedy agent, its own
predicted initial state), in fp32 with the world model and agent frozen (weights need no
gradient; activations keep theirs). :func:`check_reproduces` then compares the re-simulated
frames with the stored ones, so a saliency map is always a map of the sample the user looked at.

One forward pass per batch serves every target: each target's scalar is read off the same
trajectory and back-propagated with ``retain_graph``. Gradients are taken w.r.t.

* ``frame``: each simulated frame the agent saw ``(S, 3, 64, 64)``;
* ``state``: the agent's state *leaving* each step (store layout, ``state_out``), taken at the
  core's per-step hook point, which feeds both that step's outputs and the next step;
* ``env_h``: the RSSM's deterministic state at each step;
* ``bottleneck``: the sample's bottleneck vector;
* ``basis``: the activation the basis was fitted on (the state itself for a state key), from
  which the IC / PC coordinate gradients are projected with :meth:`Basis.project_gradient`.

**SmoothGrad on the sphere** (the seed's noise-averaged gradients): each sample becomes
``1 + noise`` copies; copy 0 is clean, the others get N(0, sigma^2) noise on the bottleneck and
are renormalised onto the unit sphere; gradients are averaged over the copies (values and
frames reported are copy 0's). ``env_grads=False`` detaches the agent's action where it is fed
back to the environment, so only the agent's own recurrence carries gradient across steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from proclab.errors import ProclabError
from proclab.interpret.saliency.targets import AgentTrace, Target, evaluate
from proclab.models import capture
from proclab.store import EpisodeStore
from proclab.store.state_codec import StateCodec
from proclab.worldmodel.simulate import dreamed
from proclab.worldmodel.videos import to_uint8

if TYPE_CHECKING:
    from proclab.interpret.workspace.folder import Workspace


@dataclass(frozen=True)
class SampleSettings:
    """How a sample store was simulated (``attrs["simulation"]`` of ``proclab wm sample``)."""

    checkpoint: str
    step: int
    steps: int
    agent: str
    modal: bool
    greedy: bool
    precision: str

    @classmethod
    def of(cls, store: EpisodeStore) -> SampleSettings:
        sims = [s.attrs["simulation"] for s in store.shards if "simulation" in s.attrs]
        if not sims:
            raise ProclabError(
                f"{str(store.path)!r} is not a sample store of `proclab wm sample` (no simulation "
                "settings); saliency needs simulated samples, or --real for recorded episodes"
            )
        keys = ("checkpoint", "step", "steps", "agent", "modal", "greedy")
        for other in sims[1:]:
            for k in keys:
                if other.get(k) != sims[0].get(k):
                    raise ProclabError(
                        f"shards of {str(store.path)!r} were simulated with different {k} "
                        f"({sims[0].get(k)!r} vs {other.get(k)!r}); use one setting per store"
                    )
        s = sims[0]
        return cls(
            s["checkpoint"],
            int(s["step"]),
            int(s["steps"]),
            s["agent"],
            bool(s["modal"]),
            bool(s["greedy"]),
            s.get("precision", "fp32"),
        )

    def check_replayable(self) -> None:
        """Settings under which a re-simulation cannot reproduce the stored frames: one line naming them."""
        if not self.modal:
            raise ProclabError(
                "the samples were simulated with --no-modal (sampled latents), which a re-simulation "
                "cannot reproduce; saliency needs samples made with --modal"
            )
        if not self.greedy:
            raise ProclabError(
                "the samples were simulated with --no-greedy (sampled actions), which a "
                "re-simulation cannot reproduce; saliency needs samples made with --greedy"
            )
        if self.agent != "trained":
            raise ProclabError(
                f"the samples were simulated with --agent {self.agent}; saliency explains the "
                "world model's own agent (samples made with --agent trained)"
            )


def open_samples(
    ws: Workspace, samples: Path | None, wm: Path | None, missing: str
) -> tuple[EpisodeStore, SampleSettings, Path]:
    """The sample store (``samples``, else the folder's), how it was simulated, and the world model to
    simulate with (``wm``, else the one that made the samples), both checked against the folder's
    recorded inputs. ``missing`` is the one-line error when neither names a sample store."""
    samples = samples or ws.inputs.get("samples")
    if samples is None:
        raise ProclabError(missing)
    store = EpisodeStore(samples)
    settings = SampleSettings.of(store)
    wm_path = Path(wm or settings.checkpoint)
    ws.require_inputs(samples=store.path, wm=wm_path)
    return store, settings, wm_path


def basis_hook(source: str, codec: StateCodec) -> str:
    """The hook point whose per-step value is basis activation ``source``.

    ``source`` is a state key (``core.0.h``), a store state field (``state_out/core.0`` of a
    one-tensor layer, or ``state_out/core.0.h``) or ``hook:NAME``. Saliency always reads a state
    where it leaves a step (the tensor that feeds that step's outputs and the next step).
    """
    if source.startswith("hook:"):
        return source.removeprefix("hook:")
    hooks = codec.hook_names()
    key = source.split("/", 1)[-1]  # state_in/ and state_out/ name the same per-step tensor
    if key in hooks:
        return hooks[key]
    parts = codec.layout.get(key, [])
    if len(parts) == 1:
        return hooks[parts[0][0]]
    raise ProclabError(
        f"basis activation {source!r} is not a state of this agent; valid: {', '.join(hooks)} or hook:NAME"
    )


def per_step(calls: list[Tensor], steps: int, batch: int) -> list[Tensor]:
    """A hook point's calls over one simulation -> its value at each step ``(B, -1)``."""
    if len(calls) == steps:
        return [c.reshape(batch, -1) for c in calls]
    if len(calls) == 1:  # one call over all steps (an unroll): time-major
        return list(calls[0].reshape(steps, batch, -1).unbind(0))
    raise ValueError(f"hook fired {len(calls)} times over {steps} steps")


def noisy_copies(bottleneck: Tensor, noise: int, sigma: float, generator: torch.Generator | None) -> Tensor:
    """``(B, D)`` -> ``(B * (1 + noise), D)``, sample-major: copy 0 clean, the rest noised and renormalised."""
    B, D = bottleneck.shape
    copies = bottleneck.unsqueeze(1).repeat(1, 1 + noise, 1)
    if noise:
        eps = torch.randn(B, noise, D, generator=generator).to(bottleneck) * sigma
        noised = copies[:, 1:] + eps
        copies = torch.cat([copies[:, :1], noised / noised.norm(dim=-1, keepdim=True).clamp(min=1e-12)], 1)
    return copies.reshape(B * (1 + noise), D)


@dataclass
class Rollout:
    """Copy 0 of each re-simulated sample, batch-first numpy (the saliency store's per-step fields)."""

    obs: np.ndarray
    action: np.ndarray
    logits: np.ndarray
    value: np.ndarray
    state: np.ndarray
    env_h: np.ndarray


@dataclass
class SaliencyBatch:
    """Gradients of a batch: ``grads[target.spec][part]`` is ``(B, S, ...)``, or ``(B, D)`` for bottleneck."""

    rollout: Rollout
    targets: dict[str, np.ndarray]
    """Each target's value at the target step (copy 0), ``(B,)``."""
    grads: dict[str, dict[str, np.ndarray]]


def saliency_batch(
    wm,
    agent,
    bottleneck: Tensor,
    targets: list[Target],
    step: int,
    steps: int,
    *,
    env_grads: bool = True,
    basis=None,
    basis_source: str | None = None,
    noise: int = 0,
    sigma: float = 1.25e-4,
    generator: torch.Generator | None = None,
) -> SaliencyBatch:
    """Simulate ``steps`` steps from ``bottleneck`` ``(B, D)`` once and back-propagate every target at ``step``.

    The simulation is closed-loop, modal and greedy (how samples are made). ``basis_source``
    names the activation ``basis`` was fitted on (needed for ``ic``/``pc`` targets and the
    projected gradients).
    """
    if not 0 <= step < steps:
        raise ProclabError(f"--step {step} is outside the samples' steps 0-{steps - 1}")
    codec = StateCodec(agent.state_shapes())
    state_hooks = codec.hook_names()
    names = list(state_hooks.values())
    b_hook = basis_hook(basis_source, codec) if basis is not None and basis_source else None
    extra = [t.hook for t in targets if t.kind == "hook"] + ([b_hook] if b_hook else [])
    for name in extra:
        if name not in names:
            names.append(name)
    B, copies = bottleneck.shape[0], 1 + noise
    x = noisy_copies(bottleneck.float(), noise, sigma, generator).requires_grad_(True)
    with torch.enable_grad(), capture(agent, names) as acts:
        traj = dreamed(wm, agent, x, steps, modal=True, greedy=True, env_grads=env_grads, detach_start=False)
        calls = {name: acts.calls(name) for name in names}
        hooks = {name: per_step(calls[name], steps, x.shape[0]) for name in names}
        trace = AgentTrace(
            traj.logits, traj.value, traj.action.argmax(-1), hooks, hooks[b_hook] if b_hook else None
        )
        inputs: dict[str, list[Tensor]] = {
            "bottleneck": [x],
            "frame": traj.per_step["frame"],
            "env_h": traj.per_step["env_h"],
            **{key: calls[hook] for key, hook in state_hooks.items()},
        }
        if b_hook and b_hook not in state_hooks.values():
            inputs["basis"] = calls[b_hook]
        flat = [t for group in inputs.values() for t in group]
        values, grads = {}, {}
        for target in targets:
            y = evaluate(target, trace, step, basis)
            values[target.spec] = y.detach().view(B, copies)[:, 0].cpu().numpy()
            g = torch.autograd.grad(y.sum(), flat, retain_graph=True, allow_unused=True)
            g = [torch.zeros_like(t) if gi is None else gi for t, gi in zip(flat, g, strict=True)]
            grads[target.spec] = _assemble(g, inputs, codec, state_hooks, b_hook, B, copies)
    rollout = _rollout(traj, codec, B, copies)
    return SaliencyBatch(rollout, values, grads)


def _assemble(g, inputs, codec, state_hooks, b_hook, B, copies) -> dict[str, np.ndarray]:
    """Flat list of gradients -> per part, averaged over the noise copies, ``(B, S, ...)``."""
    parts, i = {}, 0
    for name, group in inputs.items():
        parts[name] = g[i : i + len(group)]
        i += len(group)

    def stacked(tensors: list[Tensor]) -> Tensor:  # S of (B*copies, ...) -> (B, S, ...) mean over copies
        t = torch.stack(tensors, 1)
        return t.view(B, copies, *t.shape[1:]).mean(1)

    out = {
        "bottleneck": stacked(parts["bottleneck"])[:, 0],
        "frame": stacked(parts["frame"]),
        "env_h": stacked(parts["env_h"]),
    }
    by_key = {key: stacked([p.reshape(p.shape[0], -1) for p in parts[key]]) for key in state_hooks}
    if by_key:
        out["state"] = torch.cat([by_key[key] for key, _ in codec.parts], -1)
    if b_hook:
        if "basis" in parts:
            out["basis"] = stacked([p.reshape(p.shape[0], -1) for p in parts["basis"]])
        else:
            out["basis"] = by_key[next(k for k, h in state_hooks.items() if h == b_hook)]
    return {k: v.detach().float().cpu().numpy() for k, v in out.items()}


def _rollout(traj, codec: StateCodec, B: int, copies: int) -> Rollout:
    def first(t: Tensor) -> np.ndarray:  # (S, B*copies, ...) -> copy 0, batch-first
        t = t.detach()
        return t.view(t.shape[0], B, copies, *t.shape[2:])[:, :, 0].transpose(0, 1).float().cpu().numpy()

    frames = traj.frame.detach()
    frames = frames.view(frames.shape[0], B, copies, *frames.shape[2:])[:, :, 0].transpose(0, 1)
    state = first(traj.agent_state) if codec.width else np.zeros((B, traj.frame.shape[0], 0), np.float32)
    return Rollout(
        to_uint8(frames),
        first(traj.action).argmax(-1),
        first(traj.logits),
        first(traj.value),
        state,
        first(traj.env_h),
    )


def check_reproduces(
    stored: np.ndarray,
    resimulated: np.ndarray,
    ids: list[int],
    settings: SampleSettings,
    checkpoint_step: int,
) -> None:
    """Stored frames ``(B, T, 3, 64, 64)`` must equal the re-simulated ones (to one grey level).

    One grey level is allowed because batch composition changes floating-point summation order;
    anything more means the store's settings did not reproduce the sample, and the error names
    the first setting that differs from the re-simulation's.
    """
    diff = np.abs(stored.astype(np.int16) - resimulated.astype(np.int16))
    per_sample = diff.reshape(diff.shape[0], -1).max(1)
    bad = np.flatnonzero(per_sample > 1)
    if not len(bad):
        return
    b = int(bad[0])
    t = int(np.flatnonzero(diff[b].reshape(diff.shape[1], -1).max(1) > 1)[0])
    if settings.step != checkpoint_step:
        cause = f"checkpoint step: samples from step {settings.step}, world model at step {checkpoint_step}"
    elif settings.precision != "fp32":
        cause = (
            f"precision: samples simulated in {settings.precision}, saliency re-simulates in fp32 "
            "(re-sample with --precision fp32)"
        )
    else:
        cause = f"world model {settings.checkpoint!r} (weights changed since the samples were made?)"
    raise ProclabError(
        f"re-simulated sample {ids[b]} differs from the stored one from step {t} on "
        f"(max {int(per_sample[b])} grey levels); setting that differs: {cause}"
    )
