"""Saliency on real frames, agent alone: ``proclab analyze saliency --real``.

No world model: the agent is replayed on a window of recorded frames from the state it had
at the window's start (read from the store), the frames as floats that gradients reach, and a
target (the same grammar as through the world model) is attributed to them with captum:
``gradient`` (``Saliency``, signed), ``smoothgrad`` (``NoiseTunnel`` over it, ``--noise``
samples of std ``--real-sigma``) or ``integrated-gradients`` (from black frames). The action
target reads the action the agent actually took (the stored ``action``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from rich.progress import Progress
from torch import Tensor

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.saliency.pictures import write_side_by_side, write_strip
from proclab.interpret.saliency.targets import DEFAULT_TARGETS, AgentTrace, Target, evaluate, parse_targets
from proclab.interpret.saliency.world_model import basis_hook, per_step
from proclab.interpret.workspace.selection import parse_ids
from proclab.io.run_dirs import write_json_atomic
from proclab.models import capture
from proclab.models.loading import freeze, load_agent
from proclab.store import EpisodeStore, ShardWriter
from proclab.store.schema import STATE_IN, unflatten_state
from proclab.store.state_codec import StateCodec


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
        return NoiseTunnel(Saliency(model)).attribute(
            frames, nt_type="smoothgrad", nt_samples=max(noise, 1), stdevs=sigma, abs=False
        )
    if method == "integrated-gradients":
        return IntegratedGradients(model).attribute(frames, baselines=torch.zeros_like(frames))
    raise unknown_choice("--method", method, ("gradient", "smoothgrad", "integrated-gradients"))


def load_window(store: EpisodeStore, episode: int, offset: int, window: int, codec: StateCodec, device):
    """Frames, the state entering the window, actions and previous rewards of one window."""
    length = int(store.episodes["length"][episode])
    if offset + window > length:
        raise ProclabError(
            f"episode {episode} has {length} steps; a window of {window} at offset {offset} "
            "does not fit (lower --window or --offset)"
        )
    layers = [STATE_IN + layer for layer in codec.layout]
    rows = store.read(episode, ["obs", "action", "reward", *layers], offset, offset + window)
    state = unflatten_state({k.removeprefix(STATE_IN): rows[k][0] for k in layers}, store.state_layout)
    if offset:  # the raw reward of the previous action (the agent clamps it to [-1, 1])
        prev = store.read(episode, ["reward"], offset - 1, offset + window - 1)["reward"]
    else:
        prev = np.concatenate([[0.0], rows["reward"][:-1]])
    t = lambda x: torch.as_tensor(np.asarray(x), device=device)  # noqa: E731
    return (
        t(rows["obs"]).float() / 255,
        {k: t(v).float() for k, v in state.items()},
        t(rows["action"]).long(),
        t(prev).float(),
    )


def run_real(args, ws, progress: bool = True) -> tuple[Path, list[str]]:
    """``--real``: one saliency-store episode per selected episode's window."""
    store, data, checkpoint = _real_inputs(args, ws)
    rt = args.runtime()
    agent, _, _ = load_agent(checkpoint, rt)
    freeze(agent)
    codec = StateCodec(agent.state_shapes())
    targets = parse_targets(args.target or DEFAULT_TARGETS, agent.config.num_actions)
    basis, source = ws.optional_basis(any(t.needs_basis for t in targets))
    episodes = parse_ids(args.episodes, store.num_episodes, "episode")
    out = ws.command_dir(args.name)
    summary: dict[str, list[float]] = {t.spec: [] for t in targets}
    attrs = {
        "saliency": {
            "data": str(Path(data).resolve()),
            "checkpoint": str(checkpoint),
            "method": args.method,
            "targets": [t.spec for t in targets],
            "step": args.step,
            "window": args.window,
        }
    }
    with (
        Progress(transient=True, disable=not progress) as bar,
        ShardWriter(out / "store.zarr", attrs=attrs) as writer,
    ):
        task = bar.add_task("saliency --real", total=len(episodes))
        for rank, e in enumerate(episodes):
            window = load_window(store, e, args.offset, args.window, codec, rt.device)
            steps, info, grads = _explain_window(agent, targets, window, args, basis, source)
            info = {"episode": e, "offset": args.offset, "target_step": args.step, **info}
            for t in targets:
                summary[t.spec].append(float(np.abs(grads[t.spec]).mean()))
            writer.append(steps, info)
            _pictures(out, e, rank, steps, grads, targets, args)
            bar.advance(task)
    write_json_atomic(
        out / "summary.json",
        {
            "method": args.method,
            "target_step": args.step,
            "mean_abs_grad": {k: float(np.mean(v)) for k, v in summary.items()},
        },
    )
    return out, [str(out / name) for name in ("store.zarr", "strips", "videos", "summary.json")]


def _real_inputs(args, ws) -> tuple[EpisodeStore, Path, Path]:
    """The real store, its path and the agent checkpoint (given, the folder's, else the one that
    recorded the store), checked against the folder before any work."""
    data = args.data or ws.inputs.get("data")
    if data is None:
        raise ProclabError("--real needs a store of real episodes: pass --data DATA")
    store = EpisodeStore(data)
    checkpoint = ws.agent_checkpoint(args.agent, store)
    ws.require_inputs(data=Path(data), checkpoint=checkpoint)
    if not 0 <= args.step < args.window:
        raise ProclabError(f"--step {args.step} is outside the window's steps 0-{args.window - 1}")
    return store, data, checkpoint


def _explain_window(agent, targets: list[Target], window, args, basis, source) -> tuple[dict, dict, dict]:
    """One window attributed for every target: the store's per-step fields (frames, actions, frame
    gradients), its per-episode target values and each target's frame gradient (by spec)."""
    frames, state, taken, prev = window
    steps = {"obs": (frames * 255).round().byte().cpu().numpy(), "action": taken.cpu().numpy()}
    info, grads = {}, {}
    for t in targets:
        model = WindowTarget(
            agent,
            t,
            args.step,
            {k: v[None] for k, v in state.items()},
            taken[None],
            prev[None] if agent.config.prev_reward else None,
            basis,
            source,
        )
        g = attribute(model, frames[None].clone(), args.method, args.noise, args.real_sigma)[0]
        grads[t.spec] = g.detach().cpu().numpy()
        steps[f"grad/{t.key}/frame"] = grads[t.spec]
        with torch.no_grad():
            info[f"target/{t.key}"] = float(model(frames[None]))
    return steps, info, grads


def _pictures(out: Path, episode: int, rank: int, steps: dict, grads: dict, targets: list[Target], args):
    """Strips (every target) for the first ``--strips`` windows, a video (four targets) for the first
    ``--videos``."""
    if rank < args.strips:
        for t in targets:
            write_strip(
                out / "strips" / f"episode_{episode:05d}_{t.key}.png", steps["obs"], grads[t.spec], args.step
            )
    if rank < args.videos:
        write_side_by_side(
            out / "videos" / f"episode_{episode:05d}.mp4",
            steps["obs"],
            dict(list(grads.items())[:4]),
            steps["action"],
            args.step,
        )
