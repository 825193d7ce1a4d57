r"""Agents as the library plays them: the :class:`AgentLike` protocol, the base its modules share (hooks by
name, caches, edits: TransformerLens's habits), and the edited agent, :class:`Intervened`.

Everything that plays or reads an agent (rollouts, recording, evaluation, the sweep, steering, saliency,
probes) takes an :class:`AgentLike`: a trained :class:`~proclab.models.agent.Agent`, an agent with edits
(:class:`Intervened`, whose modules are the agent's own, so its hook points carry the same names), or a
scripted policy (:class:`~proclab.models.scripted.ScriptedAgent`). None is unwrapped to reach another:
each answers the same calls.

**Caches and hooks.** :func:`run_with_cache` records hook points as ``(T, B, *sample)`` tensors whatever
their layout inside the agent, detached or, with ``grad=True``, keeping their autograd graph;
:func:`run_with_hooks` runs hook functions ``fn(activation, hook)`` at named hook points
(``fwd_hooks=[(name, fn)]``, TransformerLens's contract: return a tensor to replace the activation, None to
keep it) beside declarative :class:`~proclab.models.interventions.Intervention`\ s. A hook function sees
the activation as the hook point does (``hook.layout``: the torso's frames flattened over time,
``(T*B, ...)``; a recurrent state once per step, ``(B, ...)``; the rest time-major, ``(T, B, ...)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor, nn

from proclab.errors import ProclabError, unknown_choice
from proclab.models.cache import ActivationCache, resolve_names, time_major
from proclab.models.hooks import HookPoint, capture, device_of, hook_points
from proclab.models.interventions import (
    STEP_KEY,
    Call,
    Editor,
    Intervention,
    active_rows,
    state_key,
)

if TYPE_CHECKING:
    from proclab.envs import EnvConfig
    from proclab.models.agent import AgentOutput
    from proclab.run.runtime import Runtime

HookFn = Callable[[Tensor, HookPoint], Tensor | None]
"""A forward hook function as TransformerLens takes it: ``fn(activation, hook)`` -> a replacement or None."""


@runtime_checkable
class AgentLike(Protocol):
    """What every agent proclab plays answers (module docstring): its ``config`` (``num_actions``,
    ``prev_reward``, ``prev_reward_reset``), its state, one step or an unroll of ``T`` steps, and its named
    hook points."""

    config: Any

    def initial_state(self, batch: int, device: torch.device | str | None = None) -> dict[str, Tensor]: ...

    def state_shapes(self) -> dict[str, tuple[int, ...]]: ...

    def step(
        self, obs: Tensor, state: Mapping[str, Tensor], first: Tensor, prev_reward: Tensor | None = None
    ) -> tuple[AgentOutput, dict[str, Tensor]]: ...

    def unroll(
        self, obs: Tensor, state: Mapping[str, Tensor], firsts: Tensor, prev_rewards: Tensor | None = None
    ) -> tuple[AgentOutput, dict[str, Tensor]]: ...

    def hook_points(self) -> dict[str, HookPoint]: ...


def module_of(agent: AgentLike) -> nn.Module:
    """``agent`` as the torch module that every agent proclab plays is (an :class:`AgentBase`: hook points,
    devices and captures walk its submodules); anything else is refused in one line."""
    if not isinstance(agent, nn.Module):
        raise ProclabError(
            f"an agent is a torch module (proclab.models.edited.AgentBase), not a {type(agent).__name__}"
        )
    return agent


def env_config_of(agent: AgentLike) -> EnvConfig:
    """The environment ``agent`` plays (``agent.env_config``, set by :func:`proclab.load`); an agent that does not
    say (one built in memory, a scripted policy) is refused in one line."""
    env = getattr(agent, "env_config", None)
    if env is None:
        raise ProclabError(
            "this agent does not say which game it plays (no env_config): load it with proclab.load"
        )
    return env


class AgentBase(nn.Module):
    """What :class:`~proclab.models.agent.Agent`, :class:`Intervened` and the scripted policies share: hook
    points by name, caches and edits (the rest of :class:`AgentLike` is each one's own)."""

    def hook_points(self) -> dict[str, HookPoint]:
        """Every hook point by name, in forward order (each one knows its name: ``point.name``, what a hook
        function reads of the ``hook`` it is given)."""
        points = hook_points(self)
        for name, point in points.items():
            point.name = name
        return points

    def hook_names(self) -> list[str]:
        """Names of every hook point, in forward order."""
        return list(self.hook_points())

    def hook_shapes(self: AgentLike) -> dict[str, tuple[int, ...]]:
        """Per-sample shape of every hook point's activation (``(C, H, W)`` or ``(D,)``), in forward order."""
        return hook_shapes(self)

    def run_with_cache(
        self: AgentLike,
        obs: Tensor,
        state: Mapping[str, Tensor] | None = None,
        names: Iterable[str] | str | None = None,
        firsts: Tensor | None = None,
        prev_rewards: Tensor | None = None,
        *,
        grad: bool = False,
    ) -> tuple[AgentOutput, dict[str, Tensor], ActivationCache]:
        """``step`` (``obs`` ``(B, 3, 64, 64)``) or ``unroll`` (``(T, B, 3, 64, 64)``) recording hook points
        ``names`` (names or glob patterns, None: all): ``(output, state, cache)`` (:func:`run_with_cache`)."""
        return run_with_cache(self, obs, state, names, firsts, prev_rewards, grad=grad)

    def run_with_hooks(
        self: AgentLike,
        obs: Tensor,
        state: Mapping[str, Tensor] | None = None,
        *,
        fwd_hooks: Sequence[tuple[str, HookFn]] = (),
        interventions: Sequence[Intervention] = (),
        **kwargs: Any,
    ) -> tuple[AgentOutput, dict[str, Tensor], ActivationCache]:
        """As :meth:`run_with_cache` with hook functions ``fwd_hooks`` (``[(name, fn)]``) and ``interventions``
        applied (``names=`` to cache, default none): :func:`run_with_hooks`."""
        return run_with_hooks(self, obs, state, fwd_hooks=fwd_hooks, interventions=interventions, **kwargs)

    def with_interventions(
        self: AgentLike, interventions: Sequence[Intervention], *, seed: int = 0, count_steps: bool = False
    ) -> Intervened:
        """This agent with ``interventions`` applied on every ``step`` and ``unroll`` (:class:`Intervened`)."""
        return Intervened(self, interventions, seed=seed, count_steps=count_steps)


def hook_shapes(agent: AgentLike) -> dict[str, tuple[int, ...]]:
    """Per-sample shape of every hook point's activation (one forward pass of 2 steps of 3 rows)."""
    obs = torch.zeros((2, 3, 3, 64, 64), dtype=torch.uint8)
    firsts = torch.ones((2, 3), dtype=torch.bool)
    device = device_of(module_of(agent))
    with torch.no_grad():
        _, _, cache = run_with_cache(agent, obs.to(device), None, None, firsts.to(device))
    return {name: tuple(a.shape[2:]) for name, a in cache.items()}


# -- the edited agent ------------------------------------------------------------------------------
class Intervened(AgentBase):
    """``agent`` with ``interventions`` applied on every forward pass (``step`` and ``unroll``): an
    :class:`AgentLike` itself, so code that plays or inspects an agent runs this one unchanged; an empty list
    is the plain agent.

    Its modules are the agent's own (the same objects, under the same names), so its hook points, weights,
    device and ``state_dict`` are the agent's; ``config``, ``env_config``, ``runtime`` and ``source`` are read
    through. ``interventions`` may be replaced between calls (a batched player gives each forward pass the
    edits of the rows it holds); resample draws come from one generator seeded with ``seed``. With
    ``count_steps`` (or any edit with ``steps``) the state carries each row's episode step under
    :data:`~proclab.models.interventions.STEP_KEY`.
    """

    agent: AgentLike
    """The agent played through (not a child module: its children are this one's)."""

    def __init__(
        self,
        agent: AgentLike,
        interventions: Sequence[Intervention] = (),
        *,
        seed: int = 0,
        count_steps: bool = False,
    ) -> None:
        super().__init__()
        self.__dict__["agent"] = agent  # played through, not a child: the children below are its own
        for name, child in module_of(agent).named_children():
            self.add_module(name, child)
        self.points = self.hook_points()
        self.generator = torch.Generator().manual_seed(int(seed))
        self.count_steps = count_steps or any(iv.steps is not None for iv in interventions)
        self._shapes: dict[str, tuple[int, ...]] | None = None
        self._editors: list[Editor] = []
        self._episodes: Tensor | None = None
        self.interventions = interventions

    @property
    def config(self) -> Any:
        return self.agent.config

    @property
    def env_config(self) -> EnvConfig | None:
        return getattr(self.agent, "env_config", None)

    @property
    def runtime(self) -> Runtime | None:
        return getattr(self.agent, "runtime", None)

    @property
    def source(self) -> str | None:
        return getattr(self.agent, "source", None)

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return self.agent.state_shapes()

    @property
    def interventions(self) -> tuple[Intervention, ...]:
        return self._interventions

    @interventions.setter
    def interventions(self, interventions: Sequence[Intervention]) -> None:
        interventions = tuple(interventions)
        for iv in interventions:
            if iv.hook not in self.points:
                raise unknown_choice("hook point", iv.hook, self.points)
            if iv.of == "increment" and state_key(iv.hook, self.points) is None:
                raise ProclabError(f"an increment edit needs a recurrent state's hook point, not {iv.hook}")
            if iv.steps is not None and not self.count_steps:
                raise ProclabError(
                    f"the edit at {iv.hook} acts at some steps only: build the agent with count_steps=True "
                    "(or pass the edit when it is built)"
                )
        self._interventions = interventions
        # built now, not inside a forward pass, where finding the shapes would run the agent under the hooks
        self._editors = [Editor(iv, self.hook_shapes()[iv.hook], self.generator) for iv in interventions]

    def hook_shapes(self) -> dict[str, tuple[int, ...]]:
        """Per-sample shape of every hook point's activation (the agent's, measured once)."""
        if self._shapes is None:
            self._shapes = hook_shapes(self.agent)
        return self._shapes

    # -- state -------------------------------------------------------------------------------------
    def initial_state(self, batch: int, device: torch.device | str | None = None) -> dict[str, Tensor]:
        state = dict(self.agent.initial_state(batch, device=device))
        if self.count_steps:
            state[STEP_KEY] = torch.zeros(batch, dtype=torch.long, device=device)
        return state

    # -- forward -----------------------------------------------------------------------------------
    def unroll(
        self, obs: Tensor, state: Mapping[str, Tensor], firsts: Tensor, prev_rewards: Tensor | None = None
    ) -> tuple[AgentOutput, dict[str, Tensor]]:
        state = dict(state)
        T, B = obs.shape[:2]
        counted = state.pop(STEP_KEY, None) if self.count_steps else None
        steps = None
        if self.count_steps:
            if counted is None:
                raise ProclabError(
                    f"this agent counts steps: its state needs {STEP_KEY!r} (use its initial_state)"
                )
            steps = _episode_steps(counted, firsts.bool())
        with self.active(T, B, steps, state, firsts):
            out, new = self.agent.unroll(obs, state, firsts, prev_rewards)
        if steps is not None:  # counted
            new = {**new, STEP_KEY: steps[-1] + 1}
        return out, new

    def step(
        self, obs: Tensor, state: Mapping[str, Tensor], first: Tensor, prev_reward: Tensor | None = None
    ) -> tuple[AgentOutput, dict[str, Tensor]]:
        out, state = self.unroll(
            obs.unsqueeze(0),
            state,
            first.unsqueeze(0),
            None if prev_reward is None else prev_reward.unsqueeze(0),
        )
        return type(out)(*(x.squeeze(0) for x in out)), state

    forward = unroll

    @contextmanager
    def playing(self, episodes: Tensor | np.ndarray) -> Iterator[None]:
        """Inside the block, row ``r`` of every forward pass plays episode ``episodes[r]``: per-row values,
        masks, coordinates and stops, and ``rows``, index episodes, not the rows of the batch.

        A player whose batch shrinks as episodes end (a rollout's slots idle once their quota is played;
        a slot plays several episodes one after another) says so here, so that an edit given per episode
        reaches its episode at every step and no other."""
        before = self._episodes
        self._episodes = torch.as_tensor(episodes, dtype=torch.long)
        try:
            yield
        finally:
            self._episodes = before

    @contextmanager
    def active(
        self, T: int, B: int, steps: Tensor | None, state: Mapping[str, Tensor], firsts: Tensor
    ) -> Iterator[None]:
        """The edits as forward hooks for one call of ``T`` steps of ``B`` rows (each hook's edits in order,
        before any other hook at that point)."""
        by_hook: dict[str, list[tuple[Intervention, Editor]]] = {}
        for iv, editor in zip(self._interventions, self._editors, strict=True):
            by_hook.setdefault(iv.hook, []).append((iv, editor))
        with ExitStack() as stack:
            for hook, edits in by_hook.items():
                point = self.points[hook]
                fn = self._hook_fn(hook, edits, T, B, steps, state, firsts.bool())
                handle = point.register_forward_hook(fn, prepend=True)
                stack.callback(handle.remove)
            yield

    def _hook_fn(self, hook, edits, T, B, steps, state, firsts):
        layout = self.points[hook].layout
        key = state_key(hook, self.points)
        carried = {"t": 0, "prev": state.get(key) if key is not None else None}
        shape = edits[0][1].shape

        def fn(_module, _inputs, act: Tensor) -> Tensor:
            if layout == "step":
                t0 = carried["t"]
                span, n_t = slice(t0, t0 + 1), 1
                prev = carried["prev"]
                if prev is not None:
                    keep = (~firsts[t0]).to(act.dtype).view(-1, *([1] * (prev.dim() - 1)))
                    prev = prev.to(act.dtype) * keep
            else:
                span, n_t, prev = slice(0, T), T, None
            call = Call(n_t, B, steps, prev, self._episodes)
            rows = act.reshape(-1, *shape)
            for iv, editor in edits:
                active = active_rows(iv, call, span, act.device)
                rows = editor(rows, None if active is None else active.reshape(-1), call)
            out = rows.reshape(act.shape)
            if layout == "step":
                carried["t"], carried["prev"] = carried["t"] + 1, out
            return out

        return fn


def _episode_steps(counted: Tensor, firsts: Tensor) -> Tensor:
    """``(T, B)`` episode step of each row at each step of an unroll: ``counted`` entering step 0, restarting
    at 0 where ``firsts`` is set."""
    out = torch.empty(firsts.shape, dtype=torch.long, device=firsts.device)
    step = counted.to(firsts.device)
    for t in range(firsts.shape[0]):
        step = torch.where(firsts[t], 0, step)
        out[t] = step
        step = step + 1
    return out


# -- caches ----------------------------------------------------------------------------------------
def run_with_cache(
    agent: AgentLike,
    obs: Tensor,
    state: Mapping[str, Tensor] | None = None,
    names: Iterable[str] | str | None = None,
    firsts: Tensor | None = None,
    prev_rewards: Tensor | None = None,
    *,
    grad: bool = False,
) -> tuple[AgentOutput, dict[str, Tensor], ActivationCache]:
    """Run ``agent`` (an :class:`AgentLike`) on ``obs`` and record hook points ``names`` (names or glob
    patterns; None: all).

    ``obs`` is one step ``(B, 3, 64, 64)`` or an unroll ``(T, B, 3, 64, 64)``; ``state`` None starts every
    row afresh (``firsts`` set at the first step), otherwise ``firsts`` defaults to no reset. Returns the
    agent's output (shaped as for ``step`` or ``unroll``), the state leaving the last step, and an
    :class:`~proclab.models.cache.ActivationCache` whose every entry is ``(T, B, *sample)`` (``T = 1`` for
    one step). Values are recorded after any intervention at their hook, detached, or with ``grad=True``
    keeping their graph (gradients of an output with respect to a cached activation; the weights of a
    loaded agent are frozen, the activations are not).
    """
    _check_frames(obs)
    one_step = obs.dim() == 4
    seq = obs.unsqueeze(0) if one_step else obs
    T, B = seq.shape[:2]
    device = seq.device
    if state is None:
        state = agent.initial_state(B, device=device)
        if firsts is None:
            firsts = torch.zeros((T, B), dtype=torch.bool, device=device)
            firsts[0] = True
    if firsts is None:
        firsts = torch.zeros((T, B), dtype=torch.bool, device=device)
    elif one_step and firsts.dim() == 1:
        firsts = firsts.unsqueeze(0)
    if prev_rewards is None and getattr(getattr(agent, "config", None), "prev_reward", False):
        prev_rewards = torch.zeros((T, B), device=device)
    elif prev_rewards is not None and one_step and prev_rewards.dim() == 1:
        prev_rewards = prev_rewards.unsqueeze(0)
    points = agent.hook_points()
    chosen = resolve_names(names, points)
    with capture(module_of(agent), chosen, detach=not grad) as acts:
        out, new_state = agent.unroll(seq, state, firsts, prev_rewards)
    calls = {name: (acts.calls(name), points[name].layout) for name in acts}
    cache = ActivationCache({name: time_major(c, layout, T, B) for name, (c, layout) in calls.items()})
    if grad:
        cache.keep_graph(calls, T, B)
    if one_step:
        out = type(out)(*(x.squeeze(0) for x in out))
    return out, new_state, cache


def _check_frames(obs: Tensor) -> None:
    """Frames an agent reads are channels-first, ``(B, 3, 64, 64)`` or ``(T, B, 3, 64, 64)``; one line for
    anything else (images as procgen renders them, ``(..., 64, 64, 3)``, are the usual mistake)."""
    if not isinstance(obs, Tensor):
        raise ProclabError(f"frames must be a torch tensor, got {type(obs).__name__} (torch.from_numpy(...))")
    if obs.dim() in (4, 5) and tuple(obs.shape[-3:]) == (3, 64, 64):
        return
    hint = ""
    if obs.dim() in (4, 5) and tuple(obs.shape[-3:]) == (64, 64, 3):
        hint = f": these are channels-last images; pass obs.movedim(-1, {obs.dim() - 3})"
    raise ProclabError(
        f"frames of shape {tuple(obs.shape)}: expected (B, 3, 64, 64) or (T, B, 3, 64, 64){hint}"
    )


def run_with_hooks(
    agent: AgentLike,
    obs: Tensor,
    state: Mapping[str, Tensor] | None = None,
    *,
    fwd_hooks: Sequence[tuple[str, HookFn]] = (),
    interventions: Sequence[Intervention] = (),
    **kwargs: Any,
) -> tuple[AgentOutput, dict[str, Tensor], ActivationCache]:
    """Run ``agent`` with hook functions ``fwd_hooks`` (``[(name, fn)]``, a name or glob pattern each; ``fn(
    activation, hook)`` returns a replacement or None: module docstring) and ``interventions`` applied (the
    interventions first at a hook point, then the functions in order); as :func:`run_with_cache`, with
    ``names`` to cache (default none), which records what the rest of the network read. The hooks are
    removed when the call returns, also when it raises."""
    kwargs.setdefault("names", [])
    played = Intervened(agent, interventions) if interventions else agent
    points = agent.hook_points()
    with ExitStack() as stack:
        for pattern, fn in fwd_hooks:
            for name in resolve_names(pattern, points):
                point = points[name]
                handle = point.register_forward_hook(_forward_hook(fn))
                stack.callback(handle.remove)
        return run_with_cache(played, obs, state, **kwargs)


def _forward_hook(fn: HookFn) -> Callable[[HookPoint, tuple[Any, ...], Tensor], Tensor]:
    """Hook function ``fn`` as torch calls a forward hook: ``(point, inputs, activation)`` -> what replaces it."""
    return lambda point, _inputs, activation: _replaced(activation, fn(activation, point))


def _replaced(activation: Tensor, returned: Tensor | None) -> Tensor:
    """A hook function's result: its tensor (of the activation's shape), or the activation when it gave None."""
    if returned is None:
        return activation
    if not isinstance(returned, Tensor) or returned.shape != activation.shape:
        got = tuple(returned.shape) if isinstance(returned, Tensor) else type(returned).__name__
        raise ProclabError(
            f"a hook function returned {got}; the activation it replaces is {tuple(activation.shape)}"
        )
    return returned


__all__ = [
    "AgentBase",
    "AgentLike",
    "HookFn",
    "Intervened",
    "env_config_of",
    "hook_shapes",
    "module_of",
    "run_with_cache",
    "run_with_hooks",
]
