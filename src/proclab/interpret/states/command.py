"""``proclab analyze hidden``, ``analyze bottleneck`` and ``analyze env``: the agent's hidden states, their basis,
clusters and maps; the world model's bottleneck vectors (:mod:`.bottleneck`) and environment states
(:mod:`.simulated_env`).

Parse -> call -> write: the states of the first ``--episodes`` real episodes (a recorded state, or a hook
point replayed on the stored frames) go through :func:`proclab.interpret.states.hidden.hidden` (the
pipeline is described there), with the world model's states of ``--samples`` drawn over them. Outputs in
``ANALYSIS/hidden/``: ``hidden.npz`` (per point: episode, step, outlier, fit, pcs, ics, clusters, nmf,
tsne, entropy), ``generated.npz``, ``summary.json`` and the PNGs; the basis in ``ANALYSIS/basis.npz``, the
NMF components in ``ANALYSIS/nmf.npz`` (:mod:`proclab.interpret.bases.nmf`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from proclab.errors import ProclabError
from proclab.interpret.bases.activations import (
    HOOK,
    canonical_source,
    default_source,
    read_activation,
    replay_agent,
)
from proclab.interpret.bases.nmf import FILE as NMF_FILE
from proclab.interpret.bases.nmf import save_nmf
from proclab.interpret.states.bottleneck import NAME as BOTTLENECK
from proclab.interpret.states.bottleneck import BottleneckSettings, write_bottleneck
from proclab.interpret.states.hidden import (
    Hidden,
    HiddenSettings,
    colourings,
    drift_summary,
    entropy,
    hidden,
    shown_points,
)
from proclab.interpret.states.simulated_env import NAME as ENV
from proclab.interpret.states.simulated_env import EnvSettings, write_env
from proclab.interpret.workspace import figures
from proclab.interpret.workspace.command import AGENT, DATA, SAMPLES, MapArgs
from proclab.interpret.workspace.folder import Workspace
from proclab.io.arguments import settings_from
from proclab.io.files import save_npz
from proclab.io.progress import phases
from proclab.store.store import EpisodeStore


@dataclass(frozen=True)
class HiddenArgs(MapArgs):
    """Hidden-state analysis: outliers, the PCA/ICA basis, Ward clusters, NMF, t-SNE and their plots."""

    PRESETS: ClassVar[dict[str, dict]] = {
        "paper": {},
        "small": {"episodes": 100, "clusters": 8, "nmf": 8, "fit_points": 4000, "plot_points": 5000},
    }

    seed: int = 0
    """Seed of the fitting subsample, FastICA, NMF, t-SNE, the silhouette's and the drift's samples and the
    plotted points."""
    data: DATA = None
    """Episode store of real episodes (default: the one the analysis folder was made with)."""
    samples: SAMPLES = None
    """Sample store of the world model (proclab wm sample); its states are drawn over the real cloud."""
    state: str | None = None
    """Recorded state to analyse: core.L.NAME (e.g. core.0.h), [state_in/|state_out/]core.L[.NAME]
    (default: the first recorded state tensor, leaving each step)."""
    hook: str | None = None
    """Analyse a hook point instead (e.g. torso.hook_fc), by replaying the agent on the stored frames
    (on --device, in fp32)."""
    agent: AGENT = None
    """Agent replayed for --hook: a proclab run or checkpoint directory (default: the folder's agent, else
    the one that recorded the store)."""
    episodes: int = 4000
    """Real episodes to analyse (the store's first N; all if it has fewer)."""
    n_ics: int = 16
    """k: independent components, FastICA on the first k standardised PCs."""
    clusters: int = 32
    """Ward clusters (kNN connectivity) on the PCs that explain 95 % of the variance."""
    nmf: int = 16
    """NMF components of the min-shifted z-scored states."""
    outlier_k: int = 5
    """Neighbours for outlier removal: a point whose median distance to its k nearest is above
    mean + outlier_sigma * std of that distance is an outlier."""
    outlier_sigma: float = 2.0
    """Outlier threshold in standard deviations (see outlier_k)."""
    fit_points: int = 20_000
    """Outlier removal, basis, Ward, NMF and t-SNE are fitted on a seeded subsample of this many
    points; every other point is assigned (kNN distance, nearest centroid, openTSNE transform)."""


NAME = "hidden"


def _step_attributes(store: EpisodeStore, episodes: np.ndarray) -> dict[str, np.ndarray]:
    """What the plots colour by, per analysed step (state_out row t pairs with row t's outputs)."""
    fields_ = store.step_fields
    logits = "logits_clean" if "logits_clean" in fields_ else "logits"
    out = {}
    for name in ("action", "value", "reward"):
        if name in fields_:
            out[name] = store.read_steps(name, episodes)
    if logits in fields_:
        out["entropy"] = entropy(store.read_steps(logits, episodes).astype(np.float64))
    if "terminated" in fields_:
        last = store.read_steps("terminated", episodes)
        out["last"] = last | store.read_steps("truncated", episodes) if "truncated" in fields_ else last
    return out


@dataclass(frozen=True)
class _Inputs:
    """What an analysis reads, resolved from the arguments and the analysis folder's inputs."""

    data: Path
    store: EpisodeStore
    source: str  # the activation analysed (a store field or HOOK + hook name)
    checkpoint: Path | None
    agent: object | None  # replays a hook (None: a recorded state)
    samples: Path | None
    sample_store: EpisodeStore | None
    episodes: np.ndarray


def _inputs(args: HiddenArgs, ws: Workspace) -> _Inputs:
    """Resolve and check the inputs before any long work (a bad hook or agent stops here)."""
    data = ws.input_path("data", args.data, "--data DATA")
    store = EpisodeStore(data)
    if args.hook and args.state:
        raise ProclabError("give --state NAME or --hook NAME, not both")
    source = canonical_source(store, HOOK + args.hook if args.hook else args.state or default_source(store))
    checkpoint = ws.agent_checkpoint(args.agent, store if source.startswith(HOOK) else None)
    agent = None
    if source.startswith(HOOK):
        agent = replay_agent(store, source.removeprefix(HOOK), checkpoint, args.runtime())
    samples = args.samples or (ws.inputs.get("samples") and Path(ws.inputs["samples"]))
    sample_store = EpisodeStore(samples) if samples else None
    if sample_store is not None:
        canonical_source(sample_store, source)
    ws.require_inputs(data=data, samples=samples, activation=source, checkpoint=checkpoint)
    if args.episodes < 1 or store.num_episodes == 0:
        raise ProclabError(
            f"--episodes {args.episodes} of a store of {store.num_episodes}: need at least one"
        )
    episodes = np.arange(min(args.episodes, store.num_episodes))
    settings_from(args, HiddenSettings).check(int(store.episodes["length"][episodes].sum()))
    return _Inputs(data, store, source, checkpoint, agent, samples, sample_store, episodes)


def run_hidden(args: HiddenArgs) -> Path:
    start = time.perf_counter()
    ws = Workspace.open(args.out)
    inp = _inputs(args, ws)
    with phases(12 if inp.sample_store else 11, "analyze hidden") as ph:
        with ph.phase("reading states"):
            acts = read_activation(inp.store, inp.source, inp.episodes, agent=inp.agent, progress=ph.fraction)
            attrs = _step_attributes(inp.store, inp.episodes)
        provenance = {
            "data": str(inp.data.resolve()),
            "episodes": len(inp.episodes),
            "checkpoint": str(inp.checkpoint) if inp.checkpoint else None,
        }
        res = hidden(
            acts,
            settings=settings_from(args, HiddenSettings),
            attributes=attrs,
            samples=inp.sample_store,
            agent=inp.agent,
            provenance=provenance,
        )
        with ph.phase("writing"):
            files = _write(ws, res, args)
    summary = {
        "activation": res.activation,
        "data": str(inp.data.resolve()),
        "samples": str(inp.samples) if inp.samples else None,
        "episodes": len(inp.episodes),
        **res.summary(),
        "seconds": ph.seconds,
    }
    return ws.finish(NAME, args, files, summary, start)


def _write(ws: Workspace, res: Hidden, args: HiddenArgs) -> list[Path]:
    out = ws.command_dir(NAME)
    save_npz(out / "hidden.npz", "hidden-state arrays", **res.arrays)
    files = [out / "hidden.npz"]
    if res.generated_arrays is not None:
        save_npz(out / "generated.npz", "generated-state arrays", **res.generated_arrays)
        files.append(out / "generated.npz")
    res.basis.save(ws.stage(ws.basis_path.name))  # published with the command's folder
    files.append(ws.basis_path)
    if args.plots:
        files += _plots(out, res, args)
    files.append(save_nmf(ws.path / NMF_FILE, res.nmf_components, res.nmf_shift))
    return files


def _plots(out: Path, res: Hidden, args: HiddenArgs) -> list[Path]:
    a, basis, generated = res.arrays, res.basis, res.generated_arrays
    shown = shown_points(a, args.plot_points, args.seed)
    panels = colourings(a, shown, args.clusters)
    k = basis.n_ics
    files = [
        figures.scatter_grid(
            a["pcs"][shown, :2],
            panels,
            out / "pca_scatter.png",
            "hidden states: PC 0 vs PC 1",
            ("PC 0", "PC 1"),
        ),
        figures.scatter_grid(
            a["tsne"][shown], panels, out / "tsne_scatter.png", "hidden states: t-SNE", ("t-SNE 1", "t-SNE 2")
        ),
        figures.variance_explained(
            basis.explained_variance_ratio,
            k,
            out / "variance_explained.png",
            "variance explained by the PCs of the z-scored states",
        ),
    ]
    firsts = np.unique(a["episode"])[:12]
    paths = [a["pcs"][a["episode"] == e, :2] for e in firsts]
    files.append(
        figures.trajectories(
            a["pcs"][shown, :2],
            paths,
            out / "trajectories_pca.png",
            "episodes in PC space (green: start, red: end)",
            ("PC 0", "PC 1"),
        )
    )
    extra = None if generated is None else {"generated": generated["ics"]}
    inl = ~a["outlier"]
    files.append(figures.histograms(a["ics"][inl], out / "ic_histograms.png", "IC coordinates", "IC", extra))
    if generated is not None:
        pairs = [("PC 0", "PC 1", 0, 1, "pcs"), ("PC 2", "PC 3", 2, 3, "pcs"), ("IC 0", "IC 1", 0, 1, "ics")]
        files.append(
            figures.overlays(
                a,
                generated,
                shown,
                pairs,
                out / "generated_over_real.png",
                "generated states (black) over the real states (grey)",
            )
        )
        files.append(figures.drift(generated, drift_summary(generated), out / "generated_drift.png"))
    return files


# -- analyze bottleneck -----------------------------------------------------------------------------
@dataclass(frozen=True)
class BottleneckArgs(MapArgs):
    """Bottleneck vectors of informed vs random-init samples: PCA, Ward, t-SNE and an MMD test.

    Runs no network (numpy and scikit-learn): the runtime options change nothing."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"clusters": 16, "permutations": 200}}

    seed: int = 0
    """Seed of t-SNE, the silhouette's sample, the MMD test's subsamples and its permutations."""
    samples: SAMPLES = None
    """Sample store with informed-init samples (default: the one the analysis folder was made with);
    random-init samples in it are used too."""
    random_samples: SAMPLES = None
    """A second sample store with random-init samples (proclab wm sample --init random)."""
    pcs: int = 128
    """Principal components of the standardised informed vectors (the random ones are projected on them)."""
    clusters: int = 100
    """Ward clusters (kNN connectivity) of the vectors."""
    permutations: int = 1000
    """Permutations for the p-value of the informed-vs-random MMD test."""
    test_points: int = 2000
    """Vectors per group used by the MMD test (a seeded subsample beyond this)."""


def run_bottleneck(args: BottleneckArgs) -> Path:
    start = time.perf_counter()
    ws = Workspace.open(args.out)
    settings = settings_from(args, BottleneckSettings)
    files, summary = write_bottleneck(ws, args.samples, args.random_samples, settings)
    return ws.finish(BOTTLENECK, args, files, summary, start)


# -- analyze env ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EnvArgs(MapArgs):
    """Environment-state analysis of a sample store: PCA, Ward clusters and t-SNE of env_h.

    Runs no network (numpy and scikit-learn): the runtime options change nothing."""

    PRESETS: ClassVar[dict[str, dict]] = {
        "paper": {},
        "small": {"pcs": 32, "clusters": 16, "fit_points": 4000, "plot_points": 5000},
    }

    seed: int = 0
    """Seed of the fitting subsample, t-SNE, the silhouette's sample and the plotted points."""
    samples: SAMPLES = None
    """Sample store (proclab wm sample; default: the one the analysis folder was made with)."""
    pcs: int = 128
    """Principal components kept of the standardised env states."""
    clusters: int = 128
    """Ward clusters (kNN connectivity) on the PCs that explain 95 % of the variance."""
    fit_points: int = 20_000
    """Ward and t-SNE are fitted on a seeded subsample of this many points; the rest are assigned."""


def run_env(args: EnvArgs) -> Path:
    start = time.perf_counter()
    ws = Workspace.open(args.out)
    files, summary = write_env(ws, args.samples, settings_from(args, EnvSettings))
    return ws.finish(ENV, args, files, summary, start)
