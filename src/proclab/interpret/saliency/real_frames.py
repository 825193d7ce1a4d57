"""Saliency on real frames, agent alone: what ``proclab analyze saliency --real`` computes, as a function.

No world model: the agent is replayed on a window of real frames from the state it had at the window's
start, the frames as floats that gradients reach, and each target (the same grammar as through the world
model, :mod:`proclab.interpret.saliency.targets`) is attributed to them with captum: ``gradient``
(``Saliency``, signed), ``smoothgrad`` (``NoiseTunnel`` over it, ``noise`` samples of std ``sigma``) or
``integrated-gradients`` (from black frames). The action target reads the action the agent actually took.

:func:`saliency` takes the windows from a :class:`~proclab.record.rollout.Rollout` (the state entering a
window is the one recorded while playing when the agent is the rollout's own, else the agent's own state,
replayed on the frames before the window)::

    settings = proclab.analyze.SaliencySettings(step=4, targets=("value", "action"))
    res = proclab.analyze.saliency(agent, rollout=ro, settings=settings)
    res.plot()           # frames over their saliency, one row per target

``proclab analyze saliency --real`` reads them from a recorded store (:func:`load_window`) and calls
:func:`explain`, as :func:`saliency` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, cast

import numpy as np
import torch
from torch import Tensor

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.saliency.pictures import strip
from proclab.interpret.saliency.targets import DEFAULT_TARGETS, AgentTrace, Target, evaluate, parse_targets
from proclab.interpret.saliency.world_model import basis_hook, per_step
from proclab.interpret.workspace.selection import parse_ids
from proclab.io.files import figure_of, subplots
from proclab.io.progress import analysis_phases
from proclab.io.results import Result
from proclab.models import capture
from proclab.models.hooks import device_of
from proclab.store import EpisodeStore
from proclab.store.schema import STATE_IN, unflatten_state
from proclab.store.state_codec import StateCodec

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from proclab.interpret.bases.pca_ica import Basis
    from proclab.models.edited import AgentLike
    from proclab.record.rollout import Rollout

METHODS = ("gradient", "smoothgrad", "integrated-gradients")


@dataclass(frozen=True)
class SaliencySettings:
    """How the frames of a window are attributed (the ``--real`` options of ``proclab analyze saliency``:
    ``sigma`` is its ``--real-sigma``), and what :func:`saliency` attributes on which episodes."""

    method: str = "gradient"
    """gradient, smoothgrad or integrated-gradients."""
    step: int = 4
    """The target step, within the window."""
    window: int = 10
    """Steps per window."""
    offset: int = 0
    """First step of each episode's window."""
    noise: int = 8
    """smoothgrad: noised copies of each window."""
    sigma: float = 0.05
    """smoothgrad: noise std on frames in [0, 1]."""
    targets: tuple[str, ...] = DEFAULT_TARGETS
    """What is attributed (:mod:`proclab.interpret.saliency.targets`: value, action, ic:K, ...; ``ic:K`` and
    ``pc:K`` need a basis); a single name or a list is taken as a tuple."""
    episodes: tuple[int, ...] | str | None = None
    """Episodes whose window is attributed: ids or a selection such as ``"0:4"`` (None: every episode long
    enough for the window)."""

    def __post_init__(self):
        targets = (self.targets,) if isinstance(self.targets, str) else tuple(self.targets)
        object.__setattr__(self, "targets", targets)
        if self.episodes is not None and not isinstance(self.episodes, str):
            object.__setattr__(self, "episodes", tuple(int(b) for b in self.episodes))

    def check(self) -> None:
        if self.method not in METHODS:
            raise unknown_choice("--method", self.method, METHODS)
        if self.window < 1 or self.offset < 0 or self.noise < 0:
            raise ProclabError(
                f"window must be >= 1, offset and noise >= 0; got {self.window}, {self.offset}, {self.noise}"
            )
        if not 0 <= self.step < self.window:
            raise ProclabError(f"--step {self.step} is outside the window's steps 0-{self.window - 1}")


class Window(NamedTuple):
    """One window of an episode, on the agent's device: frames ``(W, 3, 64, 64)`` as floats in [0, 1], the
    agent state entering its first step, the actions taken and the raw reward of each step's previous
    action (0 before an episode's first step)."""

    frames: Tensor
    state: dict[str, Tensor]
    taken: Tensor
    prev: Tensor


@dataclass(frozen=True, repr=False)
class Saliency(Result):
    """Per window (one per episode) and target, the frame attribution ``grads[spec]`` ``(E, W, 3, 64, 64)``
    and the target's value, with the frames and actions; ``mean_abs_grad`` per target is what the command's
    ``summary.json`` holds (the mean over windows of each window's mean ``|grad|``)."""

    method: str
    target_step: int
    mean_abs_grad: dict[str, float]
    episodes: list[int]
    offset: int
    values: dict[str, np.ndarray] = field(repr=False)
    frames: np.ndarray = field(repr=False)
    actions: np.ndarray = field(repr=False)
    grads: dict[str, np.ndarray] = field(repr=False)

    def summary(self) -> dict:
        """What ``summary.json`` holds."""
        return {"method": self.method, "target_step": self.target_step, "mean_abs_grad": self.mean_abs_grad}

    def table(self) -> list[dict]:
        rows = []
        for spec, g in self.grads.items():
            mass = np.abs(g).reshape(*g.shape[:2], -1).sum(-1)  # (E, W)
            before = mass[:, : self.target_step].sum(1) / np.maximum(mass.sum(1), 1e-30)
            rows.append({
                "target": spec,
                "mean |grad|": self.mean_abs_grad[spec],
                "mean value": float(self.values[spec].mean()),
                "mass before the target step": float(before.mean()),
            })  # fmt: skip
        return rows

    def plot(self, ax: Axes | None = None, window: int = 0) -> Figure:
        """Window ``window``'s frames and, per target, their saliency over them (blue raises the target, red
        lowers it; the target step marked green), as the command's strips."""
        specs = list(self.grads)
        if not 0 <= window < len(self.episodes):
            raise ProclabError(f"window {window} of {len(self.episodes)} (0-{len(self.episodes) - 1})")
        if ax is not None and len(specs) != 1:
            raise ProclabError(f"{len(specs)} targets need a figure of their own: call plot() without ax")
        if ax is None:
            fig, grid = subplots(len(specs), 1, squeeze=False)
            axes = list(grid[:, 0])
        else:
            fig, axes = figure_of(ax), [ax]
        for a, spec in zip(axes, specs, strict=True):
            a.imshow(strip(self.frames[window], self.grads[spec][window], self.target_step))
            a.set_title(f"{spec}, episode {self.episodes[window]}", fontsize=9)
            a.axis("off")
        if ax is None:
            fig.set_size_inches(1.2 * self.frames.shape[1], 2.6 * len(specs))
        return fig


class WindowTarget(torch.nn.Module):
    """``frames (B, W, 3, 64, 64) -> target (B,)``: the agent replayed from ``state`` over the window.

    The per-window state, actions and previous rewards are fixed attributes (captum repeats the
    inputs for its noise / interpolation samples, so they are expanded to match the batch).
    """

    def __init__(
        self,
        agent,
        target: Target,
        step: int,
        state: dict[str, Tensor],
        taken: Tensor,
        prev_rewards: Tensor | None,
        basis=None,
        basis_source: str | None = None,
    ):
        super().__init__()
        self.agent, self.target, self.step, self.basis = agent, target, step, basis
        self.state, self.taken, self.prev_rewards = state, taken, prev_rewards
        codec = StateCodec(agent.state_shapes())
        self.b_hook = basis_hook(basis_source, codec) if basis is not None and basis_source else None
        self.hooks = [h for h in (target.hook, self.b_hook) if h]

    def forward(self, frames: Tensor) -> Tensor:
        B, W = frames.shape[:2]
        reps = B // self.taken.shape[0]  # captum stacks its samples along the batch, input-major
        state = {k: v.repeat_interleave(reps, 0) for k, v in self.state.items()}
        rewards = None if self.prev_rewards is None else self.prev_rewards.repeat_interleave(reps, 0).T
        firsts = torch.zeros(W, B, dtype=torch.bool, device=frames.device)
        with capture(self.agent, self.hooks) as acts:
            out, _ = self.agent.unroll(frames.transpose(0, 1), state, firsts, rewards)
        hooks = {h: per_step(acts.calls(h), W, B) for h in self.hooks}
        trace = AgentTrace(
            out.logits,
            out.value,
            self.taken.repeat_interleave(reps, 0).T,
            hooks,
            hooks[self.b_hook] if self.b_hook else None,
        )
        return evaluate(self.target, trace, self.step, self.basis)


def attribute(model: WindowTarget, frames: Tensor, method: str, noise: int, sigma: float) -> Tensor:
    """captum attribution of ``model`` to ``frames`` (same shape)."""
    # lazy: captum is slow to import, only --real saliency needs it
    from captum.attr import IntegratedGradients, NoiseTunnel, Saliency

    frames = frames.detach().requires_grad_(True)
    if method == "gradient":
        return Saliency(model).attribute(frames, abs=False)
    if method == "smoothgrad":
        # one tensor in, one tensor out: captum's annotation also covers a tuple of inputs and its deltas
        return cast(
            Tensor,
            NoiseTunnel(Saliency(model)).attribute(
                frames, nt_type="smoothgrad", nt_samples=max(noise, 1), stdevs=sigma, abs=False
            ),
        )
    if method == "integrated-gradients":
        return IntegratedGradients(model).attribute(frames, baselines=torch.zeros_like(frames))
    raise unknown_choice("--method", method, METHODS)


def saliency(
    agent: AgentLike,
    *,
    rollout: Rollout,
    basis: Basis | None = None,
    settings: SaliencySettings = SaliencySettings(),
    progress: bool = True,
) -> Saliency:
    """Attribute ``settings.targets`` (module docstring; ``ic:K``/``pc:K`` need ``basis``, e.g. a
    :func:`~proclab.interpret.states.hidden.hidden` result's) to the frames of one window per episode of
    ``rollout`` (``settings.episodes``), ``agent`` (any agent in memory) replayed over each window.
    ``progress``: show the windows attributed as they are."""
    settings.check()
    targets = parse_targets(list(settings.targets), agent.config.num_actions)
    needs = [t.spec for t in targets if t.needs_basis]
    if needs and basis is None:
        raise ProclabError(
            f"target {needs[0]} needs a basis: pass basis= (a hidden() result's, or fit_basis)"
        )
    source = None if basis is None else basis.provenance.get("activation")
    if needs and source is None:
        raise ProclabError("the basis does not say which activation it was fitted on (its provenance)")
    end = settings.offset + settings.window
    episodes = settings.episodes
    if episodes is None:
        episodes = [b for b in range(rollout.num_episodes) if rollout.lengths[b] >= end]
        if not episodes:
            raise ProclabError(
                f"no episode of the rollout has the {end} steps a window at offset {settings.offset} needs"
            )
    elif isinstance(episodes, str):
        episodes = parse_ids(episodes, rollout.num_episodes, "episode")
    episodes = list(episodes)
    with analysis_phases(progress, 2, "saliency") as ph:
        with ph.phase(f"windows of {len(episodes)} episodes"):
            windows = rollout_windows(agent, rollout, episodes, settings)
        with ph.phase(f"attributing {len(episodes)} windows"):
            return explain(
                agent, windows, episodes, targets, settings, basis, source, ph.counter(len(episodes))
            )


def rollout_windows(agent, rollout, episodes: list[int], settings: SaliencySettings) -> list[Window]:
    """The window of each of ``episodes`` of ``rollout`` (:class:`Window`), refused (one line) where an
    episode is too short for it."""
    lo, W = settings.offset, settings.window
    for b in episodes:
        _fits(b, int(rollout.lengths[b]), lo, W)
    device = device_of(agent)
    t = lambda x: torch.as_tensor(np.ascontiguousarray(x), device=device)  # noqa: E731
    state = _entering(agent, rollout, episodes, lo)
    prev = np.zeros((lo + W, rollout.num_episodes), np.float32)
    prev[1:] = rollout.rewards[: lo + W - 1]
    return [
        Window(
            t(rollout.obs[lo : lo + W, b]).float() / 255,
            {k: v[j] for k, v in state.items()},
            t(rollout.actions[lo : lo + W, b]).long(),
            t(prev[lo:, b]).float(),
        )
        for j, b in enumerate(episodes)
    ]


def _entering(agent, rollout, episodes: list[int], offset: int) -> dict[str, Tensor]:
    """The state each of ``episodes`` entered step ``offset`` with, ``(E, ...)`` per state tensor (the
    initial state at 0)."""
    device = device_of(agent)
    if offset == 0:
        return {k: v.float() for k, v in agent.initial_state(len(episodes), device=device).items()}
    states = agent_states(agent, rollout)
    return {k: torch.as_tensor(v[offset - 1, episodes], device=device).float() for k, v in states.items()}


def agent_states(agent, rollout) -> dict[str, np.ndarray]:
    """The state tensors ``agent`` leaves every step of ``rollout`` with, ``(T, B, ...)``: those recorded
    while playing when it is the agent that played, else its own, replayed on the rollout's frames (the
    per-step hook point each state tensor passes)."""
    shapes = agent.state_shapes()
    hooks = StateCodec(shapes).hook_names()
    if agent is rollout.agent and set(hooks.values()) <= set(rollout.cache):
        return {k: rollout.cache[h].numpy() for k, h in hooks.items()}
    cache = rollout.replay(agent, list(hooks.values()))
    T, B = rollout.mask.shape
    return {k: cache[h].numpy().reshape(T, B, *shapes[k]) for k, h in hooks.items()}


def _fits(episode: int, length: int, offset: int, window: int) -> None:
    if offset + window > length:
        raise ProclabError(
            f"episode {episode} has {length} steps; a window of {window} at offset {offset} "
            "does not fit (lower --window or --offset)"
        )


def load_window(
    store: EpisodeStore, episode: int, offset: int, window: int, codec: StateCodec, device
) -> Window:
    """Episode ``episode``'s window of a recorded store (its stored state entering the window)."""
    _fits(episode, int(store.episodes["length"][episode]), offset, window)
    layers = [STATE_IN + layer for layer in codec.layout]
    rows = store.read(episode, ["obs", "action", "reward", *layers], offset, offset + window)
    state = unflatten_state({k.removeprefix(STATE_IN): rows[k][0] for k in layers}, store.state_layout)
    if offset:  # the raw reward of the previous action (the agent clamps it to [-1, 1])
        prev = store.read(episode, ["reward"], offset - 1, offset + window - 1)["reward"]
    else:
        prev = np.concatenate([[0.0], rows["reward"][:-1]])
    t = lambda x: torch.as_tensor(np.asarray(x), device=device)  # noqa: E731
    return Window(
        t(rows["obs"]).float() / 255,
        {k: t(v).float() for k, v in state.items()},
        t(rows["action"]).long(),
        t(prev).float(),
    )


def explain(
    agent,
    windows: Iterable[Window],
    episodes: list[int],
    targets: list[Target],
    settings: SaliencySettings,
    basis=None,
    basis_source: str | None = None,
    tick: Callable[[], None] | None = None,
) -> Saliency:
    """Every target attributed on every window (of ``episodes``, in order); ``tick()`` after each window."""
    frames, actions = [], []
    values: dict[str, list[float]] = {t.spec: [] for t in targets}
    grads: dict[str, list[np.ndarray]] = {t.spec: [] for t in targets}
    for window in windows:
        frames.append((window.frames * 255).round().byte().cpu().numpy())
        actions.append(window.taken.cpu().numpy())
        for t in targets:
            g, value = _attribute_window(agent, t, window, settings, basis, basis_source)
            grads[t.spec].append(g)
            values[t.spec].append(value)
        if tick is not None:
            tick()
    mean = {spec: float(np.mean([float(np.abs(g).mean()) for g in gs])) for spec, gs in grads.items()}
    return Saliency(
        settings.method,
        settings.step,
        mean,
        list(episodes),
        settings.offset,
        {spec: np.array(v) for spec, v in values.items()},
        np.stack(frames),
        np.stack(actions),
        {spec: np.stack(gs) for spec, gs in grads.items()},
    )


def _attribute_window(agent, target: Target, window: Window, s: SaliencySettings, basis, source) -> tuple:
    """One target on one window: its frame attribution ``(W, 3, 64, 64)`` and its value."""
    frames, state, taken, prev = window
    model = WindowTarget(
        agent,
        target,
        s.step,
        {k: v[None] for k, v in state.items()},
        taken[None],
        prev[None] if agent.config.prev_reward else None,
        basis,
        source,
    )
    g = attribute(model, frames[None].clone(), s.method, s.noise, s.sigma)[0]
    with torch.no_grad():
        value = float(model(frames[None]))
    return g.detach().cpu().numpy(), value


__all__ = [
    "Saliency",
    "SaliencySettings",
    "Window",
    "agent_states",
    "attribute",
    "explain",
    "load_window",
    "saliency",
]
