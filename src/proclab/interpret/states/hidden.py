"""``proclab analyze hidden``: the agent's hidden states, their basis, clusters and maps.

Pipeline (the interpretation seed's ``hidden_analysis_precompute``, fitted on a subsample and
assigned to all points, see :mod:`proclab.interpret.stats.clustering`): read one activation per
step of the first ``--episodes`` real episodes; z-score with their mean and std; drop kNN
outliers; fit the basis (:mod:`proclab.interpret.bases.pca_ica`) on the inliers; Ward clusters on
the PCs that explain 95 % of the variance; NMF of the min-shifted z-scored states; a 2-D
t-SNE; generated states of ``--samples`` projected onto the same basis and tested for lying
inside the real cloud. Outputs in ``ANALYSIS/hidden/``: ``hidden.npz`` (per point:
episode, step, outlier, fit, pcs, ics, clusters, nmf, tsne, entropy), ``generated.npz``,
``summary.json`` and the PNGs; the basis in ``ANALYSIS/basis.npz``, the NMF components in
``ANALYSIS/nmf.npz`` (:mod:`proclab.interpret.bases.nmf`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from proclab.envs.actions import ACTION_NAMES
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
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.stats.clustering import (
    Outliers,
    assign_rest,
    check_clusters,
    chunks,
    inside_fraction,
    knn_outliers,
    nearest_centroid,
    nearest_distance,
    pcs_to,
    silhouette,
    subsample,
    tsne_fit,
    tsne_place,
    ward_fit,
)
from proclab.interpret.workspace import figures
from proclab.interpret.workspace.args import AGENT, DATA, SAMPLES, MapArgs
from proclab.interpret.workspace.folder import Workspace
from proclab.interpret.workspace.progress import phases
from proclab.io.files import save_npz
from proclab.run.runtime import Runtime
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
REPORTED_PCS = (1, 2, 3, 10)  # variance explained reported at these numbers of PCs (and at k)


def entropy(logits: np.ndarray) -> np.ndarray:
    """Entropy (nats) of the softmax policy of each row of logits."""
    z = logits - logits.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return -(np.exp(logp) * logp).sum(1)


def _project(basis: Basis, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PC and IC coordinates of every row, float32, in chunks (no float64 copy of all points)."""
    pcs = np.empty((len(x), basis.dim), np.float32)
    ics = np.empty((len(x), basis.n_ics), np.float32)
    for sl in chunks(len(x)):
        pcs[sl] = basis.to_pcs(x[sl])
        ics[sl] = basis.to_ics(x[sl])
    return pcs, ics


def _nmf(xf: np.ndarray, n: int, seed: int):
    """NMF (random init, as the seed) fitted on non-negative rows."""
    # lazy: scikit-learn is slow to import, only the fits need it
    from sklearn.decomposition import NMF

    return NMF(n_components=n, init="random", random_state=seed, max_iter=5000, tol=1e-4).fit(xf)


def _step_attributes(store: EpisodeStore, episodes: np.ndarray) -> dict[str, np.ndarray]:
    """What the plots colour by, per analysed step (state_out row t pairs with row t's outputs)."""
    fields = store.step_fields
    logits = "logits_clean" if "logits_clean" in fields else "logits"
    out = {}
    for name in ("action", "value", "reward"):
        if name in fields:
            out[name] = store.read_steps(name, episodes)
    if logits in fields:
        out["entropy"] = entropy(store.read_steps(logits, episodes).astype(np.float64))
    if "terminated" in fields:
        last = store.read_steps("terminated", episodes)
        out["last"] = last | store.read_steps("truncated", episodes) if "truncated" in fields else last
    return out


@dataclass(frozen=True)
class _Inputs:
    """What an analysis reads, resolved from the arguments and the analysis folder's inputs."""

    data: Path
    store: EpisodeStore
    source: str  # the activation analysed (a store field or HOOK + hook name)
    checkpoint: Path | None
    runtime: Runtime | None  # where a hook is replayed (None: a recorded state)
    samples: Path | None
    sample_store: EpisodeStore | None
    gen_source: str | None
    episodes: np.ndarray


def _inputs(args: HiddenArgs, ws: Workspace) -> _Inputs:
    """Resolve and check the inputs before any long work (a bad hook or agent stops here)."""
    data = ws.input_path("data", args.data, "--data DATA")
    store = EpisodeStore(data)
    if args.hook and args.state:
        raise ProclabError("give --state NAME or --hook NAME, not both")
    source = canonical_source(store, HOOK + args.hook if args.hook else args.state or default_source(store))
    checkpoint = ws.agent_checkpoint(args.agent, store if source.startswith(HOOK) else None)
    runtime = args.runtime() if source.startswith(HOOK) else None
    if runtime is not None:
        replay_agent(store, source.removeprefix(HOOK), checkpoint, runtime)
    samples = args.samples or (ws.inputs.get("samples") and Path(ws.inputs["samples"]))
    sample_store = EpisodeStore(samples) if samples else None
    gen_source = canonical_source(sample_store, source) if sample_store else None
    ws.require_inputs(data=data, samples=samples, activation=source, checkpoint=checkpoint)
    if args.episodes < 1 or store.num_episodes == 0:
        raise ProclabError(
            f"--episodes {args.episodes} of a store of {store.num_episodes}: need at least one"
        )
    episodes = np.arange(min(args.episodes, store.num_episodes))
    points = int(store.episodes["length"][episodes].sum())
    check_clusters(args.clusters, min(points, args.fit_points))
    check_clusters(args.nmf, min(points, args.fit_points), "NMF components")
    return _Inputs(data, store, source, checkpoint, runtime, samples, sample_store, gen_source, episodes)


@dataclass(frozen=True)
class _Cloud:
    """The z-scored points, the fitting subsample and which points are kNN outliers."""

    mu: np.ndarray
    sd: np.ndarray
    z: np.ndarray
    fit: np.ndarray  # the subsample's rows
    outliers: Outliers
    fit_in: np.ndarray  # the subsample's inliers: every fit is on these rows

    @classmethod
    def of(cls, x: np.ndarray, args: HiddenArgs) -> _Cloud:
        mu, sd = x.mean(0), x.std(0)
        sd[sd == 0] = 1.0
        z = (x - mu) / sd
        fit = subsample(len(x), args.fit_points, args.seed)
        outliers = knn_outliers(z, fit, args.outlier_k, args.outlier_sigma)
        fit_in = fit[~outliers.mask[fit]]
        check_clusters(args.clusters, len(fit_in))
        return cls(mu, sd, z, fit, outliers, fit_in)

    @property
    def fit_mask(self) -> np.ndarray:
        """Per point, whether the fits used it."""
        mask = np.zeros(len(self.z), bool)
        mask[self.fit_in] = True
        return mask


def _fit_basis(x: np.ndarray, inp: _Inputs, args: HiddenArgs) -> Basis:
    """The basis fitted on the inlier rows ``x``, recording what they are (the basis outlives this run:
    later commands of the folder project onto it)."""
    provenance = {
        "data": str(inp.data.resolve()),
        "activation": inp.source,
        "episodes": len(inp.episodes),
        "points": len(x),
        "checkpoint": str(inp.checkpoint) if inp.checkpoint else None,
    }
    return Basis.fit(x, BasisConfig(n_ics=args.n_ics, seed=args.seed), provenance)


def _ward_clusters(space: np.ndarray, fit_in: np.ndarray, args: HiddenArgs, ph) -> np.ndarray:
    """Ward clusters fitted on the inliers of ``space`` (the PCs to 95 %), every other point given its
    nearest centroid's (two progress phases)."""
    with ph.phase("ward fit"):
        fitted, centroids = ward_fit(space[fit_in], args.clusters)
    with ph.phase("ward assign"):
        return assign_rest(space, fit_in, fitted, lambda rows: nearest_centroid(rows, centroids))


def _tsne(space: np.ndarray, fit_in: np.ndarray, args: HiddenArgs, ph) -> np.ndarray:
    """A t-SNE map fitted on the inliers of ``space``, every other point placed on it (two progress
    phases)."""
    with ph.phase("t-sne fit"):
        embedding = tsne_fit(space[fit_in], args.perplexity, args.seed)
    with ph.phase("t-sne assign"):
        return assign_rest(
            space, fit_in, np.asarray(embedding, np.float32), lambda rows: tsne_place(embedding, rows)
        )


def _nmf_codes(
    x: np.ndarray, basis: Basis, fit_in: np.ndarray, args: HiddenArgs, ph
) -> tuple[np.ndarray, object, np.ndarray]:
    """NMF fitted on the min-shifted z-scored inliers, every point's codes and the shift (two progress
    phases)."""
    with ph.phase("nmf fit"):
        zs = ((x - basis.mean) / basis.std).astype(np.float32)
        shift = zs[fit_in].min(0)
        model = _nmf(zs[fit_in] - shift, args.nmf, args.seed)
    with ph.phase("nmf assign"):
        codes = np.empty((len(x), args.nmf), np.float32)
        for sl in chunks(len(x)):
            codes[sl] = model.transform(np.clip(zs[sl] - shift, 0, None))
    return codes, model, shift


def _generated(inp: _Inputs, basis: Basis, cloud: _Cloud, args: HiddenArgs) -> dict[str, np.ndarray]:
    """The world model's states on the real basis, whether each lies inside the real cloud, and how
    far each is from its nearest real state (``nearest_real``), beside the same distance of real states
    the fits did not use (``real_to_real``): the drift of dreamed states, in the z-scored units."""
    gen = read_activation(inp.sample_store, inp.gen_source, checkpoint=inp.checkpoint, runtime=inp.runtime)
    gen_pcs, gen_ics = _project(basis, gen.x)
    gen_z = (gen.x - cloud.mu) / cloud.sd
    reference = cloud.z[cloud.fit_in]
    inside = inside_fraction(reference, cloud.outliers.threshold, gen_z, args.outlier_k)
    return {
        "episode": gen.episode,
        "step": gen.step,
        "pcs": gen_pcs,
        "ics": gen_ics,
        "inside": inside,
        "nearest_real": nearest_distance(reference, gen_z).astype(np.float32),
        "real_to_real": _real_to_real(cloud, args.seed).astype(np.float32),
    }


def _real_to_real(cloud: _Cloud, seed: int, most: int = 5000) -> np.ndarray:
    """Nearest-neighbour distance of real states to the fitted ones, for states the fits did not use
    (a seeded subsample of at most ``most``); when every state was fitted, to the nearest *other* one."""
    # lazy: scikit-learn is slow to import, only the fits need it
    from sklearn.neighbors import NearestNeighbors

    reference = cloud.z[cloud.fit_in]
    unused = np.setdiff1d(np.arange(len(cloud.z)), cloud.fit)
    if len(unused):
        rows = unused[subsample(len(unused), most, seed + 2)]
        return nearest_distance(reference, cloud.z[rows])
    rows = subsample(len(reference), most, seed + 2)
    return NearestNeighbors(n_neighbors=2).fit(reference).kneighbors(reference[rows])[0][:, 1]


def drift_summary(generated: dict[str, np.ndarray]) -> dict:
    """Quantiles of the dreamed states' nearest-real distance beside the real-to-real ones, and its
    median per simulated step (does the dream leave the real cloud as it goes on?)."""

    def quantiles(d: np.ndarray) -> dict[str, float]:
        return {f"p{q}": float(np.percentile(d, q)) for q in (10, 50, 90, 99)}

    near, base = generated["nearest_real"], generated["real_to_real"]
    steps = np.unique(generated["step"])
    return {
        "nearest_real": quantiles(near),
        "real_to_real": quantiles(base),
        "median_ratio": float(np.median(near) / max(np.median(base), 1e-12)),
        "median_by_step": {int(t): float(np.median(near[generated["step"] == t])) for t in steps},
    }


def _write(ws: Workspace, arrays: dict, generated: dict | None, basis: Basis, args: HiddenArgs) -> list[Path]:
    out = ws.command_dir(NAME)
    save_npz(out / "hidden.npz", "hidden-state arrays", **arrays)
    files = [out / "hidden.npz"]
    if generated is not None:
        save_npz(out / "generated.npz", "generated-state arrays", **generated)
        files.append(out / "generated.npz")
    basis.save(ws.stage(ws.basis_path.name))  # published with the command's folder
    files.append(ws.basis_path)
    if args.plots:
        files += _plots(out, arrays, basis, generated, args)
    return files


def run_hidden(args: HiddenArgs) -> Path:
    # lazy: scipy is slow to import, only this step needs it
    from scipy.stats import kurtosis

    start = time.perf_counter()
    ws = Workspace.open(args.out)
    inp = _inputs(args, ws)
    with phases(12 if inp.sample_store else 11, "analyze hidden") as ph:
        with ph.phase("reading states"):
            acts = read_activation(
                inp.store,
                inp.source,
                inp.episodes,
                checkpoint=inp.checkpoint,
                runtime=inp.runtime,
                progress=ph.fraction,
            )
            x = acts.x
            attrs = _step_attributes(inp.store, inp.episodes)
        with ph.phase("outliers"):
            cloud = _Cloud.of(x, args)
            fit_in = cloud.fit_in
        with ph.phase("basis"):
            basis = _fit_basis(x[fit_in], inp, args)
            pcs, ics = _project(basis, x)
            n95 = pcs_to(basis.explained_variance_ratio, 0.95)
        space = pcs[:, :n95]
        clusters = _ward_clusters(space, fit_in, args, ph)
        nmf, nmf_model, nmf_shift = _nmf_codes(x, basis, fit_in, args, ph)
        tsne = _tsne(space, fit_in, args, ph)
        with ph.phase("statistics"):
            sil = silhouette(space[fit_in], clusters[fit_in], args.seed)
            kurt = kurtosis(ics[~cloud.outliers.mask], axis=0)
        generated = None
        if inp.sample_store is not None:
            with ph.phase("generated states"):
                generated = _generated(inp, basis, cloud, args)
        with ph.phase("writing"):
            arrays = {
                "episode": acts.episode,
                "step": acts.step,
                "outlier": cloud.outliers.mask,
                "fit": cloud.fit_mask,
                "knn_distance": cloud.outliers.distance.astype(np.float32),
                "pcs": pcs,
                "ics": ics,
                "clusters": clusters,
                "nmf": nmf,
                "tsne": tsne,
                **attrs,
            }
            files = _write(ws, arrays, generated, basis, args)
            files.append(save_nmf(ws.path / NMF_FILE, nmf_model.components_, nmf_shift))
    fits = {"sil": sil, "kurt": kurt, "nmf_error": float(nmf_model.reconstruction_err_), "n95": n95}
    summary = _summary(args, inp, arrays, basis, cloud, fits, generated, ph.seconds)
    return ws.finish(NAME, args, files, summary, start)


def _summary(
    args: HiddenArgs,
    inp: _Inputs,
    arrays: dict,
    basis: Basis,
    cloud: _Cloud,
    fits: dict,
    generated: dict | None,
    seconds,
) -> dict:
    ratio, k, n95, outliers = basis.explained_variance_ratio, basis.n_ics, fits["n95"], cloud.outliers
    return {
        "activation": inp.source,
        "data": str(inp.data.resolve()),
        "samples": str(inp.samples) if inp.samples else None,
        "episodes": len(inp.episodes),
        "points": len(arrays["pcs"]),
        "dim": basis.dim,
        "fit_points": len(cloud.fit),
        "outliers": int(outliers.mask.sum()),
        "outlier_share": float(outliers.mask.mean()),
        "outlier_threshold": outliers.threshold,
        "variance_explained": {str(n): float(ratio[:n].sum()) for n in (*REPORTED_PCS, k) if n <= len(ratio)},
        "pcs_to_95": n95,
        "ica": {"n_ics": k, **basis.fit_info, "kurtosis": [float(v) for v in fits["kurt"]]},
        "clusters": {
            "n": args.clusters,
            "space_pcs": n95,
            "sizes": np.bincount(arrays["clusters"], minlength=args.clusters).tolist(),
            "silhouette": fits["sil"],
        },
        "nmf": {"n": args.nmf, "reconstruction_error": fits["nmf_error"]},
        "tsne": {"perplexity": args.perplexity, "fit_points": len(cloud.fit_in)},
        "generated": None
        if generated is None
        else {
            "points": len(generated["inside"]),
            "inside_real_cloud": float(generated["inside"].mean()),
            "drift": drift_summary(generated),
        },
        "seconds": seconds,
    }


def _plots(out: Path, a: dict, basis: Basis, generated: dict | None, args: HiddenArgs) -> list[Path]:
    shown = subsample(len(a["pcs"]), args.plot_points, args.seed + 1)
    shown = shown[~a["outlier"][shown]]
    progress = a["step"] / np.maximum(1, _episode_lengths(a["episode"]))
    k, n_nmf = basis.n_ics, a["nmf"].shape[1]
    panels = [
        figures.Colouring("action", a["action"][shown], ACTION_NAMES) if "action" in a else None,
        figures.Colouring("value", a["value"][shown]) if "value" in a else None,
        figures.Colouring("policy entropy (clean logits)", a["entropy"][shown]) if "entropy" in a else None,
        figures.Colouring("reward", a["reward"][shown]) if "reward" in a else None,
        figures.Colouring("Ward cluster", a["clusters"][shown], [f"c{c}" for c in range(args.clusters)]),
        figures.Colouring("episode progress", progress[shown]),
        figures.Colouring("last step", a["last"][shown].astype(int), ["no", "last step"])
        if "last" in a
        else None,
        figures.Colouring("IC argmax", np.abs(a["ics"][shown]).argmax(1), [f"IC{m}" for m in range(k)]),
        figures.Colouring("NMF argmax", a["nmf"][shown].argmax(1), [f"NMF{m}" for m in range(n_nmf)]),
    ]
    panels = [p for p in panels if p is not None]
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


def _episode_lengths(episode: np.ndarray) -> np.ndarray:
    """Length of each point's episode (the number of its points)."""
    _, inverse, counts = np.unique(episode, return_inverse=True, return_counts=True)
    return counts[inverse]
