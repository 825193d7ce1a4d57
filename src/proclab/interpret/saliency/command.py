"""``proclab analyze saliency``: what the agent's value, actions and directions are sensitive to; and ``proclab
analyze visualize``, bottleneck vectors optimised to drive a target (:mod:`.visualize`).

Through the world model (default): the selected samples of the folder's sample store are
re-simulated and every target back-propagated (:mod:`proclab.interpret.saliency.world_model`). On real
frames (``--real``): the agent alone, replayed on windows of a real store, attributed with
captum (:func:`proclab.interpret.saliency.real_frames.explain`, what
:func:`~proclab.interpret.saliency.real_frames.saliency` computes on a rollout in memory).

Outputs in ``ANALYSIS/<name>/``:

* ``store.zarr``: a saliency store, an episode store with one episode per sample and
  env-grads setting: per step ``obs``, ``action``, ``value``, ``logits``, ``env_h`` and, per
  target ``<key>`` (``ic_3``, ``group_left``, ...), ``grad/<key>/frame``, ``/state``, ``/env_h``
  and, with a basis, ``/ic`` and ``/pc`` (gradient w.r.t. the first k IC / PC coordinates);
  per episode ``sample`` (-1 for ``--combine``), ``env_grads``, ``target_step``,
  ``bottleneck``, ``grad/<key>/bottleneck`` and ``target/<key>`` (the target's value);
* ``strips/``: PNG strips (frames over their saliency) and ``videos/``: side-by-side mp4s;
* ``summary.json``: per target and setting, mean ``|grad|`` per step (frame, state, env_h),
  the share of frame-gradient mass before the target step against the share a uniform spread would
  give (:func:`against_uniform`), and the with/without env-grads ratio.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, ClassVar

import numpy as np
import torch
import tyro

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.saliency.pictures import write_side_by_side, write_strip
from proclab.interpret.saliency.real_frames import Saliency, SaliencySettings, explain, load_window
from proclab.interpret.saliency.targets import DEFAULT_TARGETS, Target, parse_targets
from proclab.interpret.saliency.visualize import VisualizeSettings, write_visualization
from proclab.interpret.saliency.world_model import (
    SaliencyBatch,
    check_reproduces,
    open_samples,
    saliency_batch,
)
from proclab.interpret.stats.paired import mean_boot, mean_p
from proclab.interpret.workspace.command import AGENT, DATA, SAMPLES, WM, AnalysisArgs
from proclab.interpret.workspace.folder import Workspace
from proclab.interpret.workspace.selection import parse_ids
from proclab.io.arguments import settings_from
from proclab.io.progress import progress_bar
from proclab.io.run_dirs import write_json_atomic
from proclab.models.loading import freeze, load_agent
from proclab.run.runtime import RuntimeConfig
from proclab.stats.bootstrap import interval, resamples, weights
from proclab.stats.corrections import holm
from proclab.stats.permutation import sign_flips
from proclab.store import EpisodeStore, ShardWriter
from proclab.store.state_codec import StateCodec
from proclab.worldmodel.checkpoint import load_world_model

ENV_GRADS = {"on": (True,), "off": (False,), "both": (True, False)}
STORED_PARTS = ("frame", "state", "env_h", "ic", "pc")


@dataclass(frozen=True)
class SaliencyArgs(AnalysisArgs):
    """Saliency of agent targets: through the world model's samples, or on real frames (--real)."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"ids": "0:16", "noise": 2}}

    seed: int = 0
    """Seed of the SmoothGrad noise on the bottleneck vectors (through the world model)."""
    precision: str = field(default="auto", kw_only=True)
    """Arithmetic: fp32, bf16 or auto. Saliency re-simulates and back-propagates in fp32 whatever this says:
    gradients need fp32, and each stored sample is checked against its fp32 re-simulation."""
    samples: SAMPLES = None
    """Sample store (proclab wm sample, modal and greedy; default: the folder's)."""
    wm: WM = None
    """World model: a world-model run or checkpoint directory (default: the one the samples were simulated
    with)."""
    ids: str = "0:100"
    """Samples to explain: ids and lo:hi ranges, e.g. 0:100,250."""
    target: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()
    """A target (repeat the flag for more; default: value and action; see docs/analyses.md): value,
    value-delta, action, action:NAME, group:left|right|up|down, ic:K, pc:K, ic:0-15, hook:NAME[:INDEX]."""
    step: int = 4
    """Target step (the seed's: 4 of 10)."""
    noise: int = 8
    """SmoothGrad: noised copies of each bottleneck besides the clean one (0: plain gradient)."""
    sigma: float = 1.25e-4
    """SmoothGrad noise std on the bottleneck before renormalising to the sphere."""
    env_grads: str = "on"
    """on: gradients also flow through the actions fed back to the environment; off: not; both: one
    episode each."""
    combine: bool = False
    """Explain one sample made of the mean of the selected bottlenecks (renormalised)."""
    batch: int = 8
    """Samples simulated at once (each with 1 + noise copies)."""
    store_grads: tuple[str, ...] = STORED_PARTS
    """Per-step gradients kept in the saliency store (frame gradients are 48 KiB per step and target;
    cross-causation needs only ic)."""
    name: str = "saliency"
    """Subfolder of the analysis folder for this run (several runs can live side by side)."""
    strips: int = 8
    """PNG strips for the first K samples (every target and setting)."""
    videos: int = 4
    """Side-by-side mp4s for the first K samples."""
    real: bool = False
    """Agent alone on real frames of DATA (captum) instead of through the world model."""
    data: DATA = None
    """--real: episode store of real episodes (default: the folder's)."""
    agent: AGENT = None
    """--real: the agent, a proclab run or checkpoint directory (default: the folder's, else the one that
    recorded DATA)."""
    episodes: str = "0:4"
    """--real: episodes (ids and ranges); each gives the window at --offset."""
    window: int = 10
    """--real: steps per window (the agent is replayed from its recorded state at the window start)."""
    offset: int = 0
    """--real: first step of each episode's window."""
    method: str = "gradient"
    """--real: gradient, smoothgrad (captum NoiseTunnel, --noise samples, --real-sigma) or
    integrated-gradients (from black frames)."""
    real_sigma: float = 0.05
    """--real smoothgrad: noise std on frames in [0, 1]."""


def run_saliency(args: SaliencyArgs, progress: bool = True) -> Path:
    """Run the saliency analysis; returns its output folder."""
    if args.env_grads not in ENV_GRADS:
        raise unknown_choice("--env-grads setting", args.env_grads, ENV_GRADS)
    unknown = set(args.store_grads) - set(STORED_PARTS)
    if unknown:
        raise unknown_choice("--store-grads part", sorted(unknown)[0], STORED_PARTS)
    if args.noise < 0 or args.batch < 1:
        raise ProclabError(f"--noise must be >= 0 and --batch >= 1, got {args.noise} and {args.batch}")
    start = time.time()
    ws = Workspace.open(args.out)
    if args.real:
        out, outputs = _run_real(args, ws, progress)
    else:
        out, outputs = _run_simulated(args, ws, progress)
    ws.record_command(args.name, asdict(args), outputs, time.time() - start)
    return ws.final(out)


def real_settings(args: SaliencyArgs) -> SaliencySettings:
    return SaliencySettings(args.method, args.step, args.window, args.offset, args.noise, args.real_sigma)


def _run_real(args: SaliencyArgs, ws: Workspace, progress: bool) -> tuple[Path, list[str]]:
    """``--real``: one window per selected episode of the real store, one saliency-store episode each."""
    settings = real_settings(args)
    settings.check()
    store, data, checkpoint = _real_inputs(args, ws)
    rt = args.runtime()
    agent, _, _ = load_agent(checkpoint, rt)
    freeze(agent)
    codec = StateCodec(agent.state_shapes())
    targets = parse_targets(args.target or DEFAULT_TARGETS, agent.config.num_actions)
    basis, source = ws.optional_basis(any(t.needs_basis for t in targets))
    episodes = parse_ids(args.episodes, store.num_episodes, "episode")
    out = ws.command_dir(args.name)
    with progress_bar(transient=True, disable=not progress) as bar:
        task = bar.add_task("saliency --real", total=len(episodes))
        windows = (load_window(store, e, args.offset, args.window, codec, rt.device) for e in episodes)
        res = explain(agent, windows, episodes, targets, settings, basis, source, lambda: bar.advance(task))
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
    with ShardWriter(out / "store.zarr", attrs=attrs) as writer:
        for j, e in enumerate(res.episodes):
            steps = {"obs": res.frames[j], "action": res.actions[j]}
            steps |= {f"grad/{t.key}/frame": res.grads[t.spec][j] for t in targets}
            info = {"episode": e, "offset": res.offset, "target_step": res.target_step}
            writer.append(steps, info | {f"target/{t.key}": float(res.values[t.spec][j]) for t in targets})
            _real_pictures(out, res, j, targets, args)
    write_json_atomic(out / "summary.json", res.summary())
    return out, [str(out / name) for name in ("store.zarr", "strips", "videos", "summary.json")]


def _real_inputs(args: SaliencyArgs, ws: Workspace) -> tuple[EpisodeStore, Path, Path]:
    """The real store, its path and the agent checkpoint (given, the folder's, else the one that
    recorded the store), checked against the folder before any work."""
    data = args.data or ws.inputs.get("data")
    if data is None:
        raise ProclabError("--real needs a store of real episodes: pass --data DATA")
    store = EpisodeStore(data)
    checkpoint = ws.agent_checkpoint(args.agent, store)
    ws.require_inputs(data=Path(data), checkpoint=checkpoint)
    return store, data, checkpoint


def _real_pictures(out: Path, res: Saliency, j: int, targets: list[Target], args: SaliencyArgs) -> None:
    """Strips (every target) for the first ``--strips`` windows, a video (four targets) for the first
    ``--videos``."""
    episode, frames = res.episodes[j], res.frames[j]
    if j < args.strips:
        for t in targets:
            write_strip(
                out / "strips" / f"episode_{episode:05d}_{t.key}.png", frames, res.grads[t.spec][j], args.step
            )
    if j < args.videos:
        grads = {t.spec: res.grads[t.spec][j] for t in targets[:4]}
        write_side_by_side(
            out / "videos" / f"episode_{episode:05d}.mp4", frames, grads, res.actions[j], args.step
        )


def _run_simulated(args: SaliencyArgs, ws: Workspace, progress: bool) -> tuple[Path, list[str]]:
    store, settings, wm_path = open_samples(
        ws,
        args.samples,
        args.wm,
        "no sample store: pass --samples SAMPLES (proclab wm sample) or use a folder that has one",
    )
    settings.check_replayable()
    rt = args.runtime()
    wm, agent, ckpt = load_world_model(wm_path, rt)
    freeze(wm)
    targets = parse_targets(args.target or DEFAULT_TARGETS, wm.num_actions)
    basis, source = ws.optional_basis(any(t.needs_basis for t in targets))
    ids = parse_ids(args.ids, store.num_episodes)
    groups = [ids] if args.combine else [ids[i : i + args.batch] for i in range(0, len(ids), args.batch)]
    out = ws.command_dir(args.name)
    attrs = {
        "saliency": {
            "samples": str(store.path.resolve()),
            "checkpoint": str(ckpt.path),
            "targets": [t.spec for t in targets],
            "step": args.step,
            "noise": args.noise,
            "sigma": args.sigma,
            "basis_activation": source,
        }
    }
    stats = Summary(targets, args.step)
    generator = torch.Generator().manual_seed(args.seed)
    shown = 0
    with (
        progress_bar(transient=True, disable=not progress) as bar,
        ShardWriter(out / "store.zarr", attrs=attrs) as writer,
    ):
        task = bar.add_task("saliency", total=len(groups) * len(ENV_GRADS[args.env_grads]))
        for group in groups:
            stored = np.stack([store.read(i, ["obs"])["obs"] for i in group])
            bottleneck = torch.from_numpy(np.stack([store.info(i)["bottleneck"] for i in group])).to(
                rt.device
            )
            if args.combine:
                bottleneck = torch.nn.functional.normalize(bottleneck.mean(0, keepdim=True), dim=-1)
            for env_grads in ENV_GRADS[args.env_grads]:
                res = saliency_batch(
                    wm,
                    agent,
                    bottleneck,
                    targets,
                    args.step,
                    settings.steps,
                    env_grads=env_grads,
                    basis=basis,
                    basis_source=source,
                    noise=args.noise,
                    sigma=args.sigma,
                    generator=generator,
                )
                if not args.combine:
                    check_reproduces(stored, res.rollout.obs, group, settings, ckpt.step)
                names = [-1] if args.combine else group
                for j, sample in enumerate(names):
                    steps, info = episode_rows(res, j, targets, basis, args.store_grads)
                    writer.append(
                        steps, {"sample": sample, "env_grads": env_grads, "target_step": args.step, **info}
                    )
                    stats.add(env_grads, res, j)
                    if shown + j < max(args.strips, args.videos):
                        _pictures(out, res, j, sample, env_grads, targets, args, shown + j)
                bar.advance(task)
            shown += len(group)
    write_json_atomic(out / "summary.json", stats.result())
    return out, [str(out / name) for name in ("store.zarr", "strips", "videos", "summary.json")]


def episode_rows(
    res: SaliencyBatch, j: int, targets: list[Target], basis, parts: tuple[str, ...] = STORED_PARTS
) -> tuple[dict, dict]:
    """Sample ``j`` of a batch as one saliency-store episode (per-step fields, per-episode fields)."""
    r = res.rollout
    steps = {
        "obs": r.obs[j],
        "action": r.action[j].astype(np.int64),
        "value": r.value[j],
        "logits": r.logits[j],
        "env_h": r.env_h[j],
    }
    info = {}
    for t in targets:
        g = res.grads[t.spec]
        for part in ("frame", "state", "env_h"):
            if part in g and part in parts:
                steps[f"grad/{t.key}/{part}"] = g[part][j]
        for part, kind in (("ic", "ica"), ("pc", "pca")):
            if basis is not None and "basis" in g and part in parts:
                steps[f"grad/{t.key}/{part}"] = basis.project_gradient(g["basis"][j], kind).astype(np.float32)
        info[f"grad/{t.key}/bottleneck"] = g["bottleneck"][j]
        info[f"target/{t.key}"] = float(res.targets[t.spec][j])
    return steps, info


def _pictures(out: Path, res: SaliencyBatch, j: int, sample: int, env_grads: bool, targets, args, rank: int):
    tag = f"sample_{sample:05d}" if sample >= 0 else "combined"
    tag += "" if env_grads else "_no-env-grads"
    frames = res.rollout.obs[j]
    if rank < args.strips:
        for t in targets:
            write_strip(
                out / "strips" / f"{tag}_{t.key}.png", frames, res.grads[t.spec]["frame"][j], args.step
            )
    if rank < args.videos:
        grads = {t.spec: res.grads[t.spec]["frame"][j] for t in targets[:4]}
        write_side_by_side(out / "videos" / f"{tag}.mp4", frames, grads, res.rollout.action[j], args.step)


class Summary:
    """Running means for ``summary.json`` (see the module docstring)."""

    def __init__(self, targets: list[Target], step: int):
        self.targets, self.step = targets, step
        self.sums: dict[tuple[str, bool, str], np.ndarray] = {}
        self.shares: dict[tuple[str, bool], list[float]] = {}
        self.counts: dict[bool, int] = {}

    def add(self, env_grads: bool, res: SaliencyBatch, j: int) -> None:
        self.counts[env_grads] = self.counts.get(env_grads, 0) + 1
        for t in self.targets:
            g = res.grads[t.spec]
            for part in ("frame", "state", "env_h"):
                if part in g:
                    x = np.abs(g[part][j]).reshape(g[part].shape[1], -1).mean(1)
                    key = (t.spec, env_grads, part)
                    self.sums[key] = self.sums.get(key, 0) + x
            mass = np.abs(g["frame"][j]).reshape(g["frame"].shape[1], -1).sum(1)
            share = mass[: self.step].sum() / max(mass.sum(), 1e-30)
            self.shares.setdefault((t.spec, env_grads), []).append(float(share))

    def result(self) -> dict:
        out: dict = {
            "target_step": self.step,
            "samples": {str(k): v for k, v in self.counts.items()},
            "targets": {},
        }
        uniform = self.step / (self.step + 1)
        tests = {
            env_grads: against_uniform([self.shares[(t.spec, env_grads)] for t in self.targets], uniform)
            for env_grads in self.counts
        }
        for i, t in enumerate(self.targets):
            entry = {}
            for env_grads, n in self.counts.items():
                setting = "env_grads" if env_grads else "no_env_grads"
                parts = {
                    p: (self.sums[(t.spec, env_grads, p)] / n).tolist()
                    for p in ("frame", "state", "env_h")
                    if (t.spec, env_grads, p) in self.sums
                }
                entry[setting] = {"mean_abs_grad": parts, "mass_before_target": tests[env_grads][i]}
            if len(self.counts) == 2:
                entry["ratio_with_without"] = {
                    p: float(
                        np.sum(entry["env_grads"]["mean_abs_grad"][p])
                        / max(np.sum(entry["no_env_grads"]["mean_abs_grad"][p]), 1e-30)
                    )
                    for p in entry["env_grads"]["mean_abs_grad"]
                }
            out["targets"][t.spec] = entry
        return out


def against_uniform(
    shares: list[list[float]], uniform: float, reps: int = 4000, alpha: float = 0.05, seed: int = 0
) -> list[dict]:
    """Each target's share of frame-gradient mass on the frames before the target step (one list of
    per-sample shares per target) against ``uniform``, the share those frames would hold if the mass
    were spread evenly over the frames that can carry it (the target step's and the earlier ones: a
    frame after the target cannot move it, so ``step / (step + 1)``). Per target: the mean share, its
    bootstrap 95 % interval over samples, the mean excess over uniform with its interval, a sign-flip
    permutation p-value of that excess, Holm-adjusted over the targets, and a verdict (``above
    uniform``, ``below uniform`` or ``not distinguishable``). A share of 0.75 at step 4 is *below* the
    0.8 that no temporal preference would give: claims that the earlier frames matter more need the
    excess, not the share."""
    out, p = [], []
    for i, x in enumerate(shares):
        x = np.asarray(x, np.float64)
        excess = x - uniform
        idx = resamples(len(x), reps, seed + i)
        boot = mean_boot(excess, weights(idx, len(x)))
        p.append(mean_p(np.zeros_like(excess), excess, sign_flips(len(x), reps, seed + i)))
        out.append(
            {
                "mean": float(x.mean()),
                "ci95": interval(boot + uniform),
                "uniform": uniform,
                "excess": float(excess.mean()),
                "excess_ci95": interval(boot),
                "samples": len(x),
            }
        )
    for entry, q in zip(out, holm(p), strict=True):
        lo, hi = entry["excess_ci95"]
        shown = q <= alpha
        verdict = "above uniform" if shown and lo > 0 else "below uniform" if shown and hi < 0 else None
        entry.update(p_holm=float(q), verdict=verdict or "not distinguishable")
    return out


# -- analyze visualize ------------------------------------------------------------------------------
@dataclass(frozen=True)
class VisualizeArgs(AnalysisArgs):
    """Visualize: optimise bottleneck vectors through the simulation to maximise or minimise a target."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"n": 4, "iterations": 50, "videos": 2}}

    seed: int = 0
    """Seed of the random initial vectors (--init random) and the seed optimiser's acceptance draws."""
    precision: str = field(default="auto", kw_only=True)
    """Arithmetic: fp32, bf16 or auto. The vectors are optimised through the simulation in fp32 whatever
    this says (the gradients need fp32)."""

    maximize: Annotated[str | None, tyro.conf.arg(metavar="TARGET")] = None
    """Target to drive up: value, value-delta, action:NAME, group:DIR, ic:K, pc:K or hook:NAME[:I]."""
    minimize: Annotated[str | None, tyro.conf.arg(metavar="TARGET")] = None
    """Target to drive down (same grammar as --maximize)."""
    step: int | None = None
    """Simulation step whose target is optimised (default: the mean over every step)."""
    n: int = 8
    """Vectors optimised together."""
    init: str = "informed"
    """informed (the sample store's first N bottleneck vectors) or random (uniform on the sphere)."""
    iterations: int = 200
    """Optimiser steps."""
    lr: float = 0.01
    """Learning rate (seed optimiser: its initial value, decaying linearly to zero)."""
    optimizer: str = "adam"
    """adam, or seed (SGD with decay and annealed acceptance, interpreting-rl-behavior's)."""
    diversity: float = 0.1
    """Weight of the mean cosine similarity between vectors in the objective (0: none)."""
    temperature: float = 0.01
    """seed optimiser: initial acceptance temperature."""
    steps: int | None = None
    """Simulated steps per rollout (default: the sample store's)."""
    samples: SAMPLES = None
    """Sample store (proclab wm sample): informed vectors and the simulation settings (default: the folder's)."""
    wm: WM = None
    """World model: a world-model run or checkpoint directory (default: the one the samples were simulated
    with)."""
    videos: int = 4
    """Videos of the first K optimised rollouts."""


def run_visualize(args: VisualizeArgs) -> Path:
    start = time.time()
    settings, runtime = settings_from(args, VisualizeSettings), settings_from(args, RuntimeConfig)
    settings.check()  # before the folder is opened: a mistake leaves none behind
    ws = Workspace.open(args.out)
    out, name, files = write_visualization(ws, args.samples, args.wm, settings, runtime, start)
    ws.record_command(name, asdict(args), files, time.time() - start)
    return ws.final(out)
