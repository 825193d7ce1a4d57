"""``proclab analyze behaviours``, ``analyze xcorr`` and ``analyze consistency``: the behaviours of a sample
store, and the dynamics of its ICs per behaviour (:mod:`.xcorr`, :mod:`.consistency`).

Parse -> call -> write: :func:`proclab.interpret.behaviours.grouping.behaviours` fits and describes the
behaviours of ``--samples`` (the folder's activation, its basis for the distinctive ICs); this command
writes ``transform.npz`` (the fitted transform), ``labels.npz`` (ids, labels, step labels, t-SNE),
``summary.json``, the t-SNE maps and a grid video of the largest behaviours. ``--assign NEW_SAMPLES`` puts
another store's samples into the saved behaviours instead.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, ClassVar

import numpy as np
import tyro

from proclab.interpret.bases.activations import HOOK, replay_agent
from proclab.interpret.behaviours.consistency import NAME as CONSISTENCY
from proclab.interpret.behaviours.consistency import ConsistencySettings, write_consistency
from proclab.interpret.behaviours.grouping import (
    NAME,
    TRANSFORM,
    BehaviourModel,
    Behaviours,
    BehaviourSettings,
    SampleSet,
    behaviours,
    open_samples,
    source_of,
    step_colouring,
)
from proclab.interpret.behaviours.xcorr import NAME as XCORR
from proclab.interpret.behaviours.xcorr import (
    Dynamics,
    DynamicsSettings,
    XcorrSettings,
    format_ids,
    load_dynamics,
    write_xcorr,
)
from proclab.interpret.saliency.command import SaliencyArgs, run_saliency
from proclab.interpret.workspace.command import SAMPLES, AnalysisArgs
from proclab.interpret.workspace.figures import scatter_grid
from proclab.interpret.workspace.folder import Workspace
from proclab.interpret.workspace.selection import parse_ids
from proclab.io.arguments import settings_from
from proclab.io.files import save_npz
from proclab.io.progress import phases
from proclab.io.run_dirs import write_json_atomic
from proclab.io.video import annotate, to_hwc, upscale, write_video
from proclab.store import EpisodeStore


@dataclass(frozen=True)
class BehavioursArgs(AnalysisArgs):
    """Behaviours: clusters of agent+env state sequences of the samples, their videos, stats and transform.

    The runtime options matter only where the folder's activation is a hook point: the agent is then
    replayed on the samples' frames, on --device."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"clusters": 8, "videos": 8}}

    seed: int = 0
    """Seed of the fit's PCAs and t-SNE (the stability refit uses seed + 1)."""
    samples: SAMPLES = None
    """Sample store (proclab wm sample; default: the folder's)."""
    ids: str = "0:"
    """Samples to cluster: ids and lo:hi ranges (default all; the seed used 4000)."""
    clusters: int = 32
    """Behaviours (Ward clusters)."""
    pcs: int = 64
    """PCA components of the standardised features before t-SNE."""
    env_pcs: int = 16
    """Top PCs of the env state (env_h) in the features."""
    lags: tuple[int, ...] = (2, 4, 6)
    """Lags of the feature differences (a sample of T steps gives T - max(lags) steps of features)."""
    perplexity: float = 30.0
    """t-SNE perplexity."""
    stability: bool = True
    """Refit with seed + 1 and report the adjusted Rand index between the two labelings."""
    videos: int = 32
    """Grid videos (up to 9 members each) for the K largest behaviours."""
    assign: Annotated[Path | None, tyro.conf.arg(metavar="NEW_SAMPLES")] = None
    """Instead of fitting: assign NEW_SAMPLES (same agent and world model) to the saved behaviours."""


def run_behaviours(args: BehavioursArgs) -> Path:
    start = time.time()
    ws = Workspace.open(args.out)
    store, _ = open_samples(args.samples, ws)
    if args.assign is not None:
        return _run_assign(args, ws, ws.path / NAME, start)
    out = ws.command_dir(NAME)
    source = source_of(ws, store)
    agent = None
    if source.startswith(HOOK):
        agent = replay_agent(store, source.removeprefix(HOOK), ws.agent_checkpoint(), args.runtime())
    basis, _ = ws.optional_basis(needed=False)
    with phases(4 + int(args.stability), "behaviours") as ph:
        res = behaviours(
            store, source, agent=agent, basis=basis, settings=settings_from(args, BehaviourSettings)
        )
        with ph.phase("writing, plots and videos"):
            res.model.save(out / TRANSFORM)
            save_npz(
                out / "labels.npz",
                "behaviour labels",
                ids=res.ids,
                labels=res.labels,
                step_labels=res.step_labels,
                tsne=res.tsne,
                clusters=args.clusters,
            )
            write_json_atomic(out / "summary.json", res.summary() | {"seconds": ph.seconds})
            outputs = _plots(out, res) + _videos(out, store, res, args.videos)
    ws.record_command(
        NAME,
        asdict(args),
        [str(out / f) for f in (TRANSFORM, "labels.npz", "summary.json")] + [str(p) for p in outputs],
        time.time() - start,
    )
    return ws.final(out)


def _run_assign(args: BehavioursArgs, ws: Workspace, out: Path, start: float) -> Path:
    model = BehaviourModel.load(out / TRANSFORM)
    new = EpisodeStore(args.assign)
    ids = parse_ids("0:", new.num_episodes)
    s = SampleSet.read(new, ids, source_of(ws, new), ws.agent_checkpoint(), args.runtime())
    labels, steps = model.assign(s.state, s.env_h)
    path = out / f"assigned_{Path(args.assign).name.removesuffix('.zarr')}.npz"
    save_npz(path, "behaviour assignments", ids=s.ids, labels=labels, step_labels=steps)
    ws.record_command(f"{NAME}-assign", asdict(args), [str(path)], time.time() - start)
    return out


def _plots(out: Path, res: Behaviours) -> list[Path]:
    xyz = res.tsne.reshape(-1, 3)
    panels = [step_colouring(res.step_labels)]
    return [
        scatter_grid(
            xyz[:, [a, b]],
            panels,
            out / f"tsne_{a}{b}.png",
            "behaviours: 3-D t-SNE",
            (f"t-SNE {a}", f"t-SNE {b}"),
        )
        for a, b in ((0, 1), (0, 2), (1, 2))
    ]


def _videos(out: Path, store: EpisodeStore, res: Behaviours, k: int) -> list[Path]:
    """A 3x3 grid video of up to 9 members per behaviour, with the agent's action drawn on each tile."""
    sizes = np.bincount(res.labels)
    paths = []
    for c in np.argsort(-sizes, kind="stable")[:k]:
        members = np.flatnonzero(res.labels == c)[:9]
        if not len(members):
            continue
        tiles = []
        for m in members:
            sample = store.read(int(res.ids[m]), ["obs", "action"])
            frames = upscale(to_hwc(sample["obs"]), 2)
            tiles.append(
                np.stack([annotate(f, int(a)) for f, a in zip(frames, sample["action"], strict=True)])
            )
        while len(tiles) < 9:
            tiles.append(np.zeros_like(tiles[0]))
        rows = [np.concatenate(tiles[r * 3 : r * 3 + 3], 2) for r in range(3)]
        paths.append(
            write_video(out / "videos" / f"behaviour_{int(c):02d}.mp4", np.concatenate(rows, 1), fps=4)
        )
    return paths


# -- analyze xcorr and consistency ------------------------------------------------------------------
@dataclass(frozen=True)
class DynamicsArgs(AnalysisArgs):
    """What xcorr and consistency share: the samples, the saliency run of IC targets, the lags."""

    seed: int = 0
    """Seed of the SmoothGrad noise of the saliency run (if it is made here)."""
    samples: SAMPLES = None
    """Sample store (default: the folder's)."""
    saliency: str = "saliency-ic"
    """Saliency run (subfolder) with targets ic:0-(k-1) and --env-grads both; made here if missing."""
    step: int = 4
    """Target step k* of that saliency run (if it is made here)."""
    noise: int = 8
    """SmoothGrad copies of that saliency run (if it is made here)."""
    max_lag: int = 10
    """Largest lag of the cross-correlation."""


@dataclass(frozen=True)
class XcorrArgs(DynamicsArgs):
    """Cross-correlation and cross-causation of IC time series per behaviour (members only)."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"noise": 2}}

    extrema: float = 0.02
    """Share of the extrema-conditioned cross-correlation (top and bottom 2 % of the later IC)."""
    xcaus: bool = True
    """Also the cross-causation Jacobians (needs, or runs, the saliency run)."""
    plots: bool = True
    """Write the heatmap PNGs."""


@dataclass(frozen=True)
class ConsistencyArgs(DynamicsArgs):
    """Consistency: sign agreement of IC Jacobians and cross-correlations per behaviour, vs a permutation null."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"permutations": 200}}

    seed: int = 0
    """Seed of the label permutations of the null and of the saliency run's SmoothGrad noise (if it is made
    here)."""

    permutations: int = 1000
    """Label permutations of the null."""
    quantile: float = 0.75
    """Strong pairs: both |J| and |X| above this quantile of their matrix."""
    plots: bool = True
    """Write the triptych PNGs."""


def _ic_saliency(args: DynamicsArgs, ws: Workspace, samples: Path, ids: np.ndarray, k: int) -> EpisodeStore:
    path = ws.path / args.saliency / "store.zarr"
    if not path.exists():
        run_saliency(
            SaliencyArgs(
                out=ws.path,
                samples=samples,
                ids=format_ids(np.sort(ids)),
                target=(f"ic:0-{k - 1}",),
                step=args.step,
                noise=args.noise,
                env_grads="both",
                name=args.saliency,
                strips=0,
                videos=0,
                store_grads=("ic",),
                seed=args.seed,
                device=args.device,
                precision=args.precision,
                channels_last=args.channels_last,
                torch_threads=args.torch_threads,
            )
        )
    return EpisodeStore(path)


def dynamics_of(args: DynamicsArgs, ws: Workspace, xcaus: bool = True) -> Dynamics:
    """The folder's dynamics (:func:`~.xcorr.load_dynamics`); with ``xcaus``, the saliency run of IC targets
    is made first if it is missing (it shows its own progress)."""
    saliency = partial(_ic_saliency, args, ws) if xcaus else None
    return load_dynamics(ws, settings_from(args, DynamicsSettings), args.runtime(), saliency)


def run_xcorr(args: XcorrArgs) -> Path:
    start = time.time()
    ws = Workspace.open(args.out)
    d = dynamics_of(args, ws, xcaus=args.xcaus)
    out, outputs = write_xcorr(ws, d, settings_from(args, XcorrSettings))
    ws.record_command(XCORR, asdict(args), [str(p) for p in outputs], time.time() - start)
    return ws.final(out)


def run_consistency(args: ConsistencyArgs) -> Path:
    start = time.time()
    ws = Workspace.open(args.out)
    d = dynamics_of(args, ws)
    out, outputs = write_consistency(ws, d, settings_from(args, ConsistencySettings))
    ws.record_command(CONSISTENCY, asdict(args), [str(p) for p in outputs], time.time() - start)
    return ws.final(out)
