"""``proclab analyze visualize``: generative visualisation, bottleneck vectors optimised to drive a target.

``n`` bottleneck vectors ``v`` are optimised through the differentiable closed-loop simulation
(modal latents, greedy agent with straight-through actions, as ``wm sample`` makes samples) so
that a target of the saliency grammar (:mod:`proclab.interpret.saliency.targets`: ``value``,
``action:NAME``, ``group:DIR``, ``ic:K``, ``hook:...``) at ``--step k`` (or its mean over every
step) is as high (``--maximize``) or low (``--minimize``) as possible. The simulator reads
``b = v / |v|``, so the vectors stay on the unit sphere the world model was trained on.

Objective per vector ``i``: ``-/+ target_i + lambda * mean_{j != i} cos(b_i, b_j)``; the second
term (``--diversity``) keeps the ``n`` vectors from collapsing onto one optimum, and the spread
(mean pairwise distance of the ``b``) is reported before and after. Optimisers:

* ``adam`` (default): Adam on ``v``, renormalised after each step;
* ``seed``: interpreting-rl-behavior's target-function experiments, SGD whose learning rate
  decays linearly to zero, with simulated-annealing acceptance: a vector's proposed step is
  kept if its objective improves, else with probability ``exp(-increase / temperature)``,
  the temperature decaying linearly to zero.

Outputs (``visualize/<max|min>_<target>/``): a sample store in ``wm sample``'s format of the
optimised rollouts plus ``target_initial``/``target_final`` per episode, videos whose captions
carry the target's trajectory, target-vs-iteration curves, the rollouts' IC trajectories (when
the folder has a basis), and ``summary.json``.
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
from proclab.interpret.saliency.targets import AgentTrace, Target, evaluate, parse_target
from proclab.interpret.saliency.world_model import SampleSettings, basis_hook, open_samples, per_step
from proclab.interpret.workspace.args import SAMPLES, WM, AnalysisArgs
from proclab.interpret.workspace.figures import save_tight
from proclab.interpret.workspace.folder import Workspace
from proclab.io.files import save_npz, subplots
from proclab.io.progress import phases
from proclab.io.run_dirs import write_json_atomic
from proclab.io.video import write_video
from proclab.models import capture
from proclab.models.loading import freeze
from proclab.store import EpisodeStore, ShardWriter
from proclab.store.schema import STATE_LAYOUT_ATTR
from proclab.store.state_codec import StateCodec
from proclab.worldmodel.checkpoint import load_world_model
from proclab.worldmodel.sample import rollouts
from proclab.worldmodel.simulate import dreamed, random_bottlenecks

NAME = "visualize"
OPTIMIZERS = ("adam", "seed")
INITS = ("informed", "random")


@dataclass(frozen=True)
class OptimConfig:
    """How the vectors are optimised (see the module docstring)."""

    iterations: int = 200
    lr: float = 0.01
    optimizer: str = "adam"
    diversity: float = 0.1
    temperature: float = 0.01
    """seed optimiser: initial acceptance temperature (in objective units)."""


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


@dataclass
class Objective:
    """A target read off closed-loop simulations of ``steps`` steps, at ``step`` or averaged over steps."""

    wm: object
    agent: object
    target: Target
    steps: int
    step: int | None
    sign: float
    basis: object = None
    basis_source: str | None = None

    def trace(self, b: torch.Tensor):
        """Simulate from ``b`` ``(n, D)``; returns the trajectory and the target at every step ``(S, n)``."""
        codec = StateCodec(self.agent.state_shapes())
        b_hook = basis_hook(self.basis_source, codec) if self.target.needs_basis else None
        names = [h for h in (self.target.hook, b_hook) if h is not None]
        with capture(self.agent, names) as acts:
            traj = dreamed(self.wm, self.agent, b, self.steps, modal=True, greedy=True, detach_start=False)
        hooks = {name: per_step(acts.calls(name), self.steps, b.shape[0]) for name in names}
        trace = AgentTrace(traj.logits, traj.value, traj.action.argmax(-1), hooks, hooks.get(b_hook))
        first = 1 if self.target.kind == "value-delta" else 0
        series = torch.stack([evaluate(self.target, trace, k, self.basis) for k in range(first, self.steps)])
        if first:  # value-delta has no value at step 0
            series = torch.cat([torch.zeros_like(series[:1]), series])
        return traj, series

    @property
    def direction(self) -> str:
        """``max`` or ``min``: how outputs and the command's record are named."""
        return "max" if self.sign > 0 else "min"

    def target_of(self, series: torch.Tensor) -> torch.Tensor:
        """``(S, n)`` -> the optimised scalar per vector ``(n,)``."""
        return series.mean(0) if self.step is None else series[self.step]


def unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm(dim=-1, keepdim=True).clamp(min=1e-12)


def similarity(b: torch.Tensor) -> torch.Tensor:
    """Mean cosine similarity of each unit vector to the others ``(n,)`` (zero for one vector)."""
    n = b.shape[0]
    if n < 2:
        return b.new_zeros(n)
    gram = b @ b.T
    return (gram.sum(1) - gram.diagonal()) / (n - 1)


def spread(b: torch.Tensor) -> float:
    """Mean pairwise distance of the vectors."""
    n = b.shape[0]
    if n < 2:
        return 0.0
    d = torch.cdist(b, b)
    return float(d.sum() / (n * (n - 1)))


@dataclass
class Optimised:
    vectors: torch.Tensor
    """``(n, D)`` unit vectors."""
    history: np.ndarray
    """``(iterations + 1, n)``: the target per vector before each step, and at the end."""
    spread: tuple[float, float]
    accepted: float | None = None
    """seed optimiser: fraction of proposals accepted."""


def optimise(objective: Objective, v0: torch.Tensor, config: OptimConfig, seed: int, tick=None) -> Optimised:
    """Optimise the vectors ``v0`` ``(n, D)``; deterministic given ``seed``."""
    if config.optimizer not in OPTIMIZERS:
        raise unknown_choice("optimizer", config.optimizer, OPTIMIZERS)
    gen = torch.Generator().manual_seed(seed)
    v = unit(v0.detach().clone().float()).requires_grad_(True)
    adam = torch.optim.Adam([v], lr=config.lr) if config.optimizer == "adam" else None
    history, accepted = [], []

    def losses(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b = unit(x)
        target = objective.target_of(objective.trace(b)[1])
        return -objective.sign * target + config.diversity * similarity(b), target

    with torch.enable_grad():
        for it in range(config.iterations):
            loss, target = losses(v)
            history.append(target.detach().cpu().numpy())
            (grad,) = torch.autograd.grad(loss.sum(), [v])
            with torch.no_grad():
                if adam is not None:
                    v.grad = grad
                    adam.step()
                    v.copy_(unit(v))
                else:
                    frac = 1 - it / config.iterations
                    proposal = unit(v - config.lr * frac * grad)
                    new, _ = losses(proposal)
                    increase = new - loss.detach()
                    temp = config.temperature * frac
                    chance = torch.exp(-increase.clamp(min=0) / max(temp, 1e-12))
                    keep = (increase <= 0) | (torch.rand(len(v), generator=gen).to(v) < chance)
                    v.copy_(torch.where(keep[:, None], proposal, unit(v)))
                    accepted.append(keep.float().mean().item())
            if tick is not None:
                tick()
    with torch.no_grad():
        b = unit(v.detach())
        history.append(objective.target_of(objective.trace(b)[1]).cpu().numpy())
    return Optimised(
        b,
        np.stack(history),
        (spread(unit(v0.float())), spread(b)),
        float(np.mean(accepted)) if accepted else None,
    )


def _target(args: VisualizeArgs, num_actions: int) -> tuple[Target, float]:
    given = [(t, s) for t, s in ((args.maximize, 1.0), (args.minimize, -1.0)) if t is not None]
    if len(given) != 1:
        raise ProclabError(
            "give exactly one of --maximize TARGET or --minimize TARGET (e.g. --maximize value)"
        )
    spec, sign = given[0]
    targets = parse_target(spec, num_actions)
    if len(targets) != 1:
        raise ProclabError(f"--{'maximize' if sign > 0 else 'minimize'} {spec}: name one target, not a range")
    return targets[0], sign


def run_visualize(args: VisualizeArgs) -> Path:
    start = time.time()
    if args.init not in INITS:
        raise unknown_choice("--init", args.init, INITS)
    if args.optimizer not in OPTIMIZERS:
        raise unknown_choice("--optimizer", args.optimizer, OPTIMIZERS)
    args.require_positive("n", "iterations")
    ws = Workspace.open(args.out)
    store, settings, steps, wm_path = _simulation_inputs(args, ws)
    rt = args.runtime()
    wm, agent, ckpt = load_world_model(wm_path, rt)
    freeze(wm)
    objective = _objective(args, ws, wm, agent, steps)
    torch.manual_seed(args.seed)
    v0 = _initial_vectors(args, store, wm.config.bottleneck)
    config = OptimConfig(args.iterations, args.lr, args.optimizer, args.diversity, args.temperature)
    out = ws.command_dir(f"{NAME}/{objective.direction}_{objective.target.key}")  # a re-run replaces it
    with phases(2, NAME) as ph:
        with ph.phase(f"optimising {len(v0)} vectors ({args.iterations} iterations)"):
            done = [0]

            def tick() -> None:
                done[0] += 1
                ph.fraction(done[0], args.iterations)

            res = optimise(objective, v0.to(rt.device), config, args.seed, tick)
        with ph.phase("store, videos and plots"):
            files = _outputs(out, objective, res, settings, ckpt, args, steps)
    summary = _summary(args, objective, config, res, steps, ckpt)
    write_json_atomic(out / "summary.json", {**summary, "seconds": round(time.time() - start, 3)})
    ws.record_command(
        f"{NAME}-{objective.direction}-{objective.target.key}",
        asdict(args),
        [str(out / "summary.json"), *files],
        time.time() - start,
    )
    return ws.final(out)


def _simulation_inputs(args: VisualizeArgs, ws: Workspace) -> tuple[EpisodeStore, SampleSettings, int, Path]:
    """The sample store, its simulation settings, the steps per rollout and the world model's path,
    checked against the flags and the folder's recorded inputs before the world model is loaded."""
    store, settings, wm_path = open_samples(
        ws, args.samples, args.wm, "no sample store: pass --samples SAMPLES (proclab wm sample)"
    )
    steps = args.steps or settings.steps
    if args.step is not None and not 0 <= args.step < steps:
        raise ProclabError(f"--step {args.step} is outside the rollouts' steps 0-{steps - 1}")
    return store, settings, steps, wm_path


def _objective(args: VisualizeArgs, ws: Workspace, wm, agent, steps: int) -> Objective:
    """The target of ``--maximize``/``--minimize`` on simulations of ``steps`` steps, with the folder's
    basis when it has one (targets on ICs need it)."""
    target, sign = _target(args, wm.num_actions)
    basis, _ = ws.optional_basis(needed=False)
    if target.needs_basis and basis is None:
        raise ProclabError(
            f"target {target.spec!r} needs the folder's basis: run `proclab analyze hidden` first"
        )
    # one step more than the rollouts: the store's reward and done of the last action come from it
    return Objective(wm, agent, target, steps + 1, args.step, sign, basis, ws.inputs.get("activation"))


def _initial_vectors(args: VisualizeArgs, store: EpisodeStore, dim: int) -> torch.Tensor:
    """``(n, D)`` starting vectors: the store's first ``n`` bottlenecks (informed) or seeded random ones."""
    if args.init == "informed":
        n = min(args.n, store.num_episodes)
        return torch.from_numpy(np.stack([store.info(i)["bottleneck"] for i in range(n)])).float()
    return random_bottlenecks(args.n, dim, torch.Generator().manual_seed(args.seed))


def _summary(
    args: VisualizeArgs, objective: Objective, config: OptimConfig, res: Optimised, steps: int, ckpt
) -> dict:
    """``summary.json`` without its wall time: the target per vector before and after, and how far the
    vectors spread."""
    initial, final = res.history[0], res.history[-1]
    return {
        "target": objective.target.spec,
        "direction": objective.direction,
        "step": args.step,
        "init": args.init,
        "optimizer": asdict(config),
        "vectors": len(res.vectors),
        "steps": steps,
        "initial": initial.tolist(),
        "final": final.tolist(),
        "initial_mean": float(initial.mean()),
        "final_mean": float(final.mean()),
        "improvement": float(objective.sign * (final - initial).mean()),
        "spread": {"initial": res.spread[0], "final": res.spread[1]},
        "accepted": res.accepted,
        "norms": torch.linalg.vector_norm(res.vectors, dim=-1).tolist(),
        "world_model": str(ckpt.path),
    }


def _outputs(out: Path, objective: Objective, res: Optimised, settings, ckpt, args, steps: int) -> list[str]:
    with torch.no_grad():
        traj, series = objective.trace(res.vectors)
    series = series.cpu().numpy()  # (steps + 1, n)
    codec = StateCodec(objective.agent.state_shapes())
    reward_field = ckpt.meta["reward_field"]
    layout = {k: [[key, list(s)] for key, s in v] for k, v in codec.layout.items()}
    attrs = {
        "simulation": {
            **asdict(settings),
            "steps": steps,
            "init": f"visualize {args.init}",
            "seed": args.seed,
            "created": time.time(),
        },
        "visualize": {"target": objective.target.spec, "sign": objective.sign, "step": args.step},
    }
    store = out / "samples.zarr"
    files = [str(store)]
    spec = objective.target.spec
    with ShardWriter(store, attrs={STATE_LAYOUT_ATTR: layout, **attrs}) as writer:
        for i, (row, info) in enumerate(rollouts(traj, steps, reward_field, codec)):
            row[f"target/{objective.target.key}"] = series[:steps, i].astype(np.float32)
            writer.append(
                row,
                {
                    "init": f"visualize {args.init}",
                    "vector": i,
                    **info,
                    "target_initial": float(res.history[0, i]),
                    "target_final": float(res.history[-1, i]),
                },
            )
            if i < args.videos:
                captions = [
                    [f"{spec} {series[t, i]:+.3f}", f"v {row['value'][t]:+.2f}"] for t in range(steps)
                ]
                files.append(
                    str(
                        write_video(
                            out / "videos" / f"vector_{i:03d}.mp4",
                            row["obs"],
                            fps=4,
                            scale=4,
                            actions=row["action"],
                            captions=captions,
                        )
                    )
                )
    files.append(str(_curves(out / "target_vs_iteration.png", res.history, spec, objective.sign)))
    if objective.basis is not None and objective.basis.dim == codec.width:
        state = traj.agent_state[:steps].transpose(0, 1).double().cpu().numpy()  # (n, S, D)
        ics = objective.basis.to_ics(state.reshape(-1, state.shape[-1])).reshape(*state.shape[:2], -1)
        save_npz(out / "ic_trajectories.npz", "IC trajectories", ics=ics, target=series[:steps].T)
        files += [str(out / "ic_trajectories.npz"), str(_ic_plot(out / "ic_trajectories.png", ics, spec))]
    return files


def _curves(path: Path, history: np.ndarray, spec: str, sign: float) -> Path:
    fig, ax = subplots(figsize=(6, 4))
    ax.plot(history, color="tab:blue", alpha=0.3, lw=0.8)
    ax.plot(history.mean(1), color="black", lw=2, label="mean")
    ax.set_xlabel("iteration")
    ax.set_ylabel(spec)
    ax.set_title(f"{'maximising' if sign > 0 else 'minimising'} {spec}")
    ax.legend()
    return save_tight(fig, path)


def _ic_plot(path: Path, ics: np.ndarray, spec: str, shown: int = 4) -> Path:
    """IC coordinates over the steps of the first ``shown`` optimised rollouts."""
    k = min(shown, len(ics))
    fig, axes = subplots(1, k, figsize=(3.2 * k, 3), squeeze=False)
    for i, ax in enumerate(axes[0]):
        ax.plot(ics[i], lw=0.9)
        ax.set_title(f"vector {i}", fontsize=9)
        ax.set_xlabel("step")
    axes[0][0].set_ylabel("IC coordinate")
    fig.suptitle(f"IC trajectories, optimised for {spec}")
    return save_tight(fig, path)
