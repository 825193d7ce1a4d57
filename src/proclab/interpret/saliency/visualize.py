"""Generative visualisation, bottleneck vectors optimised to drive a target (``proclab analyze visualize``).

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
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.saliency.targets import AgentTrace, Target, evaluate, parse_target
from proclab.interpret.saliency.world_model import SampleSettings, basis_hook, open_samples, per_step
from proclab.interpret.workspace.figures import save_tight
from proclab.interpret.workspace.folder import Workspace
from proclab.io.files import save_npz, subplots
from proclab.io.progress import phases
from proclab.io.run_dirs import write_json_atomic
from proclab.io.video import write_video
from proclab.models import capture
from proclab.models.loading import freeze
from proclab.run.runtime import RuntimeConfig
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
class VisualizeSettings:
    """What :func:`write_visualization` optimises (the options of ``proclab analyze visualize``, same names and
    meanings)."""

    maximize: str | None = None  # target to drive up (one of maximize and minimize)
    minimize: str | None = None  # target to drive down
    step: int | None = None  # simulation step whose target is optimised (None: the mean over every step)
    n: int = 8  # vectors optimised together
    init: str = "informed"  # informed (the sample store's first n bottleneck vectors) or random
    iterations: int = 200  # optimiser steps
    lr: float = 0.01  # learning rate (seed optimiser: its initial value)
    optimizer: str = "adam"  # adam or seed
    diversity: float = 0.1  # weight of the mean cosine similarity between vectors
    temperature: float = 0.01  # seed optimiser: initial acceptance temperature
    steps: int | None = None  # simulated steps per rollout (None: the sample store's)
    videos: int = 4  # videos of the first K optimised rollouts
    seed: int = 0  # the random initial vectors and the seed optimiser's acceptance draws

    def check(self) -> None:
        if self.init not in INITS:
            raise unknown_choice("--init", self.init, INITS)
        if self.optimizer not in OPTIMIZERS:
            raise unknown_choice("--optimizer", self.optimizer, OPTIMIZERS)
        for name in ("n", "iterations"):
            if getattr(self, name) < 1:
                raise ProclabError(f"--{name} must be >= 1, got {getattr(self, name)}")


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


def _target(settings: VisualizeSettings, num_actions: int) -> tuple[Target, float]:
    given = [(t, s) for t, s in ((settings.maximize, 1.0), (settings.minimize, -1.0)) if t is not None]
    if len(given) != 1:
        raise ProclabError(
            "give exactly one of --maximize TARGET or --minimize TARGET (e.g. --maximize value)"
        )
    spec, sign = given[0]
    targets = parse_target(spec, num_actions)
    if len(targets) != 1:
        raise ProclabError(f"--{'maximize' if sign > 0 else 'minimize'} {spec}: name one target, not a range")
    return targets[0], sign


def write_visualization(
    ws: Workspace,
    samples: Path | None,
    world_model: Path | None,
    settings: VisualizeSettings,
    runtime: RuntimeConfig,
    start: float,
) -> tuple[Path, str, list[str]]:
    """Optimise bottleneck vectors of the sample store ``samples`` (default: the folder's) through the world
    model ``world_model`` (default: the one that simulated them) on ``runtime``, written into
    ``ANALYSIS/visualize/<direction>_<target>/`` (the wall time since ``start``, a ``time.time()`` value, in
    its summary); returns the folder, the name the folder records the run under, and its files."""
    settings.check()
    store, simulation, steps, wm_path = _simulation_inputs(settings, ws, samples, world_model)
    rt = runtime.runtime()
    wm, agent, ckpt = load_world_model(wm_path, rt)
    freeze(wm)
    objective = _objective(settings, ws, wm, agent, steps)
    torch.manual_seed(settings.seed)
    v0 = _initial_vectors(settings, store, wm.config.bottleneck)
    config = OptimConfig(
        settings.iterations, settings.lr, settings.optimizer, settings.diversity, settings.temperature
    )
    out = ws.command_dir(f"{NAME}/{objective.direction}_{objective.target.key}")  # a re-run replaces it
    with phases(2, NAME) as ph:
        with ph.phase(f"optimising {len(v0)} vectors ({settings.iterations} iterations)"):
            done = [0]

            def tick() -> None:
                done[0] += 1
                ph.fraction(done[0], settings.iterations)

            res = optimise(objective, v0.to(rt.device), config, settings.seed, tick)
        with ph.phase("store, videos and plots"):
            files = _outputs(out, objective, res, simulation, ckpt, settings, steps)
    summary = _summary(settings, objective, config, res, steps, ckpt)
    write_json_atomic(out / "summary.json", {**summary, "seconds": round(time.time() - start, 3)})
    return out, f"{NAME}-{objective.direction}-{objective.target.key}", [str(out / "summary.json"), *files]


def _simulation_inputs(
    settings: VisualizeSettings, ws: Workspace, samples: Path | None, wm: Path | None
) -> tuple[EpisodeStore, SampleSettings, int, Path]:
    """The sample store, its simulation simulation, the steps per rollout and the world model's path,
    checked against the flags and the folder's recorded inputs before the world model is loaded."""
    store, simulation, wm_path = open_samples(
        ws, samples, wm, "no sample store: pass --samples SAMPLES (proclab wm sample)"
    )
    steps = settings.steps or simulation.steps
    if settings.step is not None and not 0 <= settings.step < steps:
        raise ProclabError(f"--step {settings.step} is outside the rollouts' steps 0-{steps - 1}")
    return store, simulation, steps, wm_path


def _objective(settings: VisualizeSettings, ws: Workspace, wm, agent, steps: int) -> Objective:
    """The target of ``--maximize``/``--minimize`` on simulations of ``steps`` steps, with the folder's
    basis when it has one (targets on ICs need it)."""
    target, sign = _target(settings, wm.num_actions)
    basis, _ = ws.optional_basis(needed=False)
    if target.needs_basis and basis is None:
        raise ProclabError(
            f"target {target.spec!r} needs the folder's basis: run `proclab analyze hidden` first"
        )
    # one step more than the rollouts: the store's reward and done of the last action come from it
    return Objective(wm, agent, target, steps + 1, settings.step, sign, basis, ws.inputs.get("activation"))


def _initial_vectors(settings: VisualizeSettings, store: EpisodeStore, dim: int) -> torch.Tensor:
    """``(n, D)`` starting vectors: the store's first ``n`` bottlenecks (informed) or seeded random ones."""
    if settings.init == "informed":
        n = min(settings.n, store.num_episodes)
        return torch.from_numpy(np.stack([store.info(i)["bottleneck"] for i in range(n)])).float()
    return random_bottlenecks(settings.n, dim, torch.Generator().manual_seed(settings.seed))


def _summary(
    settings: VisualizeSettings, objective: Objective, config: OptimConfig, res: Optimised, steps: int, ckpt
) -> dict:
    """``summary.json`` without its wall time: the target per vector before and after, and how far the
    vectors spread."""
    initial, final = res.history[0], res.history[-1]
    return {
        "target": objective.target.spec,
        "direction": objective.direction,
        "step": settings.step,
        "init": settings.init,
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
