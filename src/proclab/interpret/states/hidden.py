"""The hidden-state analysis as a function: outliers, the PCA/ICA basis, Ward clusters, NMF and t-SNE of
one activation per step, on states in memory.

Pipeline (the interpretation seed's ``hidden_analysis_precompute``, fitted on a subsample and
assigned to all points, see :mod:`proclab.interpret.stats.clustering`): z-score the states with their
mean and std; drop kNN outliers; fit the basis (:mod:`proclab.interpret.bases.pca_ica`) on the
inliers; Ward clusters on the PCs that explain 95 % of the variance; NMF of the min-shifted z-scored
states; a 2-D t-SNE; generated states of a world model's sample store projected onto the same basis
and tested for lying inside the real cloud. :func:`hidden` runs it on a
:class:`~proclab.record.rollout.Rollout` (or any ``(N, D)`` states) and returns a :class:`Hidden`, whose
``basis`` the sweep takes as it is::

    res = proclab.analyze.hidden(ro, "core.0.hook_h", settings=proclab.analyze.HiddenSettings(n_ics=8))
    proclab.analyze.sweep(agent, "core.0.hook_h", basis=res.basis, rollout=ro,
                          settings=proclab.analyze.SweepSettings(levels=50))

``proclab analyze hidden`` (:mod:`proclab.interpret.states.command`) reads the states of a
recorded store and calls the same function.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from proclab.envs.actions import ACTION_NAMES
from proclab.errors import ProclabError
from proclab.interpret.bases.activations import (
    Activations,
    canonical_source,
    read_activation,
    replaying,
    rollout_activations,
)
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
from proclab.interpret.workspace.folder import BASIS_FILE
from proclab.io.files import figure_of
from proclab.io.progress import Phases, analysis_phases
from proclab.io.results import Result

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from sklearn.decomposition import NMF

    from proclab.models.edited import AgentLike
    from proclab.record.rollout import Rollout
    from proclab.store.store import EpisodeStore

REPORTED_PCS = (1, 2, 3, 10)  # variance explained reported at these numbers of PCs (and at k)


@dataclass(frozen=True)
class HiddenSettings:
    """How :func:`hidden` fits (the options of ``proclab analyze hidden``, same names and meanings)."""

    n_ics: int = 16
    """k: independent components, FastICA on the first k standardised PCs."""
    clusters: int = 32
    """Ward clusters (kNN connectivity) on the PCs that explain 95 % of the variance."""
    nmf: int = 16
    """NMF components of the min-shifted z-scored states."""
    outlier_k: int = 5
    """Neighbours of the kNN outlier distance."""
    outlier_sigma: float = 2.0
    """Outlier: median kNN distance above mean + sigma * std of that distance."""
    fit_points: int = 20_000
    """Every fit is on a seeded subsample of this many points, the rest assigned."""
    perplexity: float = 30.0
    """t-SNE perplexity."""
    seed: int = 0
    """The subsample, FastICA, NMF, t-SNE and the silhouette's and the drift's samples."""

    def check(self, points: int | None = None) -> None:
        """Refuse (one line) counts below 1 and, given the ``points`` to fit, more clusters or NMF components
        than the fits will have points."""
        for name in ("n_ics", "clusters", "nmf", "outlier_k", "fit_points"):
            if getattr(self, name) < 1:
                raise ProclabError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if points is not None:
            check_clusters(self.clusters, min(points, self.fit_points))
            check_clusters(self.nmf, min(points, self.fit_points), "NMF components")


NOT_SUMMARY = ("arrays", "generated_arrays", "nmf_components", "nmf_shift", "basis", "seed")
"""The fields of :class:`Hidden` that ``summary.json`` does not hold."""


@dataclass(frozen=True, repr=False)
class Hidden(Result):
    """The fits of :func:`hidden`: the numbers of ``analyze hidden``'s ``summary.json``, the per-point arrays
    of its ``hidden.npz`` (``arrays``: episode, step, outlier, fit, knn_distance, pcs, ics, clusters, nmf,
    tsne and what the plots colour by) and ``generated.npz``, the NMF components and the basis."""

    activation: str
    points: int
    dim: int
    fit_points: int
    outliers: int
    outlier_share: float
    outlier_threshold: float
    variance_explained: dict
    pcs_to_95: int
    ica: dict
    clusters: dict
    nmf: dict
    tsne: dict
    generated: dict | None
    arrays: dict = field(repr=False)
    generated_arrays: dict | None = field(repr=False)
    nmf_components: np.ndarray = field(repr=False)
    nmf_shift: np.ndarray = field(repr=False)
    basis: Basis = field(repr=False, compare=False, metadata={"saved": False})  # saved as basis.npz
    seed: int = 0  # the settings' seed (the plotted points are drawn with it, as the command draws them)

    def summary(self) -> dict:
        """The numbers (every field but the arrays, the basis and the seed): what ``summary.json`` holds."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in NOT_SUMMARY}

    def table(self) -> list[dict]:
        rows = [
            ("points", self.points),
            ("outliers", self.outliers),
            ("PCs to 95 % of the variance", self.pcs_to_95),
            *((f"variance explained by {n} PCs", v) for n, v in self.variance_explained.items()),
            ("cluster silhouette", self.clusters["silhouette"]),
            ("NMF reconstruction error", self.nmf["reconstruction_error"]),
            *((f"IC {m} kurtosis", k) for m, k in enumerate(self.ica["kurtosis"])),
        ]
        if self.generated is not None:
            rows.append(("generated states inside the real cloud", self.generated["inside_real_cloud"]))
        return [{"quantity": q, "value": v} for q, v in rows]

    def plot(self, ax: Axes | None = None, points: int = 20_000) -> Figure:
        """The inliers on PC 0 vs PC 1 (a seeded subsample of ``points``), one panel per colouring (action,
        value, cluster, IC argmax, ...; as ``pca_scatter.png``); on ``ax``, the Ward clusters alone."""
        shown = shown_points(self.arrays, points, self.seed)
        xy = self.arrays["pcs"][shown, :2]
        panels = colourings(self.arrays, shown, self.clusters["n"])
        if ax is not None:
            clusters = next(p for p in panels if p.title == CLUSTERS)
            figures.scatter_panel(ax, xy, clusters, ("PC 0", "PC 1"))
            return figure_of(ax)
        return figures.scatter_figure(xy, panels, "hidden states: PC 0 vs PC 1", ("PC 0", "PC 1"))

    def _write_files(self, folder: Path) -> None:
        """The basis beside the result, ``folder/basis.npz``."""
        self.basis.save(folder / BASIS_FILE)

    @classmethod
    def _read_files(cls, folder: Path, fields: dict) -> dict:
        return {"basis": Basis.load(folder / BASIS_FILE)}


def hidden(
    states: Rollout | Activations | np.ndarray,
    hook: str | None = None,
    *,
    agent: AgentLike | None = None,
    samples: EpisodeStore | None = None,
    attributes: dict[str, np.ndarray] | None = None,
    provenance: dict | None = None,
    settings: HiddenSettings = HiddenSettings(),
    progress: bool = True,
) -> Hidden:
    """Outliers, basis, clusters, NMF and t-SNE of ``states`` (module docstring).

    ``states``: a :class:`~proclab.record.rollout.Rollout` (hook point ``hook`` of its cache at every played
    step, a recurrent state's hook being the state leaving the step; the plots colour by its actions, values,
    rewards, policy entropy and episode ends), an ``(N, D)`` array (one episode, named ``hook``) or
    :class:`~proclab.interpret.bases.activations.Activations` (what ``analyze hidden`` reads from a store, which
    name their own activation: no ``hook``; ``attributes`` what the plots colour by). ``samples``: a world
    model's sample store whose states of the same activation are drawn over the real cloud (a hook is
    replayed by ``agent``, default the rollout's). ``provenance``: facts the basis records beside its
    activation and points (it outlives a notebook once saved). ``progress``: show the fits as they run."""
    # lazy: scipy is slow to import, only this step needs it
    from scipy.stats import kurtosis

    acts, attributes, agent = _points(states, hook, attributes, agent)
    settings.check(len(acts))
    generating = None if samples is None else (samples, canonical_source(samples, acts.source))
    replayer = None if generating is None else replaying(*generating, agent)
    x = acts.x
    with analysis_phases(progress, 10 if samples is not None else 9, "hidden") as ph:
        with ph.phase("outliers"):
            cloud = _Cloud.of(x, settings)
            fit_in = cloud.fit_in
        with ph.phase("basis"):
            facts = {"activation": acts.source, "points": len(fit_in), **(provenance or {})}
            basis = Basis.fit(x[fit_in], BasisConfig(n_ics=settings.n_ics, seed=settings.seed), facts)
            pcs, ics = _project(basis, x)
            n95 = pcs_to(basis.explained_variance_ratio, 0.95)
        space = pcs[:, :n95]
        clusters = _ward_clusters(space, fit_in, settings, ph)
        nmf, nmf_model, nmf_shift = _nmf_codes(x, basis, fit_in, settings, ph)
        tsne = _tsne(space, fit_in, settings, ph)
        with ph.phase("statistics"):
            sil = silhouette(space[fit_in], clusters[fit_in], settings.seed)
            kurt = kurtosis(ics[~cloud.outliers.mask], axis=0)
        generated = None
        if generating is not None:
            with ph.phase("generated states"):
                gen = read_activation(*generating, agent=replayer)
                generated = _generated(gen, basis, cloud, settings)
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
        **attributes,
    }
    ratio, k, outliers = basis.explained_variance_ratio, basis.n_ics, cloud.outliers
    return Hidden(
        activation=acts.source,
        points=len(pcs),
        dim=basis.dim,
        fit_points=len(cloud.fit),
        outliers=int(outliers.mask.sum()),
        outlier_share=float(outliers.mask.mean()),
        outlier_threshold=outliers.threshold,
        variance_explained={str(n): float(ratio[:n].sum()) for n in (*REPORTED_PCS, k) if n <= len(ratio)},
        pcs_to_95=n95,
        ica={"n_ics": k, **basis.fit_info, "kurtosis": [float(v) for v in kurt]},
        clusters={
            "n": settings.clusters,
            "space_pcs": n95,
            "sizes": np.bincount(clusters, minlength=settings.clusters).tolist(),
            "silhouette": sil,
        },
        nmf={"n": settings.nmf, "reconstruction_error": float(nmf_model.reconstruction_err_)},
        tsne={"perplexity": settings.perplexity, "fit_points": len(cloud.fit_in)},
        generated=None
        if generated is None
        else {
            "points": len(generated["inside"]),
            "inside_real_cloud": float(generated["inside"].mean()),
            "drift": drift_summary(generated),
        },
        arrays=arrays,
        generated_arrays=generated,
        nmf_components=nmf_model.components_,
        nmf_shift=nmf_shift,
        basis=basis,
        seed=settings.seed,
    )


def _points(
    states: Rollout | Activations | np.ndarray,
    hook: str | None,
    attributes: dict | None,
    agent: AgentLike | None,
) -> tuple[Activations, dict, AgentLike | None]:
    """The rows analysed, what the plots colour them by and the agent that replays a hook of the samples."""
    if isinstance(states, Activations):
        return states, dict(attributes or {}), agent
    if hook is None:
        raise ProclabError("name the hook point the states are read at: hidden(states, hook)")
    if isinstance(states, np.ndarray):
        if states.ndim != 2:
            raise ProclabError(f"states: an (N, D) array, one row per step, not shape {states.shape}")
        steps = np.arange(len(states), dtype=np.int64)
        x = np.ascontiguousarray(states, dtype=np.float32)
        return Activations(x, np.zeros_like(steps), steps, hook), dict(attributes or {}), agent
    return *rollout_points(states, hook), agent if agent is not None else states.agent


def rollout_points(rollout, hook: str) -> tuple[Activations, dict[str, np.ndarray]]:
    """One row per played step of ``rollout``, episode by episode (as a store is read): hook point ``hook`` of
    its cache (a recurrent state's hook is the state leaving the step, ``state_out/KEY``), and what the plots
    colour by (action, value, reward, policy entropy, last step)."""
    acts = rollout_activations(rollout, hook)
    step, episode = torch.from_numpy(acts.step), torch.from_numpy(acts.episode)
    at = lambda a: a[step, episode].numpy()  # noqa: E731
    attributes = {
        "action": at(rollout.actions),
        "value": at(rollout.values),
        "reward": at(rollout.rewards),
        "entropy": entropy(at(rollout.logits).astype(np.float64)),
        "last": at(rollout.terminated) | at(rollout.truncated),
    }
    return acts, attributes


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


def _nmf(xf: np.ndarray, n: int, seed: int) -> NMF:
    """NMF (random init, as the seed) fitted on non-negative rows."""
    # lazy: scikit-learn is slow to import, only the fits need it
    from sklearn.decomposition import NMF

    # scikit-learn leaves n_components unannotated; its default, "auto", makes pyright infer a str
    nmf = NMF(n_components=n, init="random", random_state=seed, max_iter=5000, tol=1e-4)  # pyright: ignore[reportArgumentType]
    return nmf.fit(xf)


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
    def of(cls, x: np.ndarray, settings: HiddenSettings) -> _Cloud:
        mu, sd = x.mean(0), x.std(0)
        sd[sd == 0] = 1.0
        z = (x - mu) / sd
        fit = subsample(len(x), settings.fit_points, settings.seed)
        outliers = knn_outliers(z, fit, settings.outlier_k, settings.outlier_sigma)
        fit_in = fit[~outliers.mask[fit]]
        check_clusters(settings.clusters, len(fit_in))
        return cls(mu, sd, z, fit, outliers, fit_in)

    @property
    def fit_mask(self) -> np.ndarray:
        """Per point, whether the fits used it."""
        mask = np.zeros(len(self.z), bool)
        mask[self.fit_in] = True
        return mask


def _ward_clusters(space: np.ndarray, fit_in: np.ndarray, settings: HiddenSettings, ph: Phases) -> np.ndarray:
    """Ward clusters fitted on the inliers of ``space`` (the PCs to 95 %), every other point given its
    nearest centroid's (two progress phases)."""
    with ph.phase("ward fit"):
        fitted, centroids = ward_fit(space[fit_in], settings.clusters)
    with ph.phase("ward assign"):
        return assign_rest(space, fit_in, fitted, lambda rows: nearest_centroid(rows, centroids))


def _tsne(space: np.ndarray, fit_in: np.ndarray, settings: HiddenSettings, ph: Phases) -> np.ndarray:
    """A t-SNE map fitted on the inliers of ``space``, every other point placed on it (two progress
    phases)."""
    with ph.phase("t-sne fit"):
        embedding = tsne_fit(space[fit_in], settings.perplexity, settings.seed)
    with ph.phase("t-sne assign"):
        return assign_rest(
            space, fit_in, np.asarray(embedding, np.float32), lambda rows: tsne_place(embedding, rows)
        )


def _nmf_codes(
    x: np.ndarray, basis: Basis, fit_in: np.ndarray, settings: HiddenSettings, ph: Phases
) -> tuple[np.ndarray, NMF, np.ndarray]:
    """NMF fitted on the min-shifted z-scored inliers, every point's codes and the shift (two progress
    phases)."""
    with ph.phase("nmf fit"):
        zs = ((x - basis.mean) / basis.std).astype(np.float32)
        shift = zs[fit_in].min(0)
        model = _nmf(zs[fit_in] - shift, settings.nmf, settings.seed)
    with ph.phase("nmf assign"):
        codes = np.empty((len(x), settings.nmf), np.float32)
        for sl in chunks(len(x)):
            codes[sl] = model.transform(np.clip(zs[sl] - shift, 0, None))
    return codes, model, shift


def _generated(
    gen: Activations, basis: Basis, cloud: _Cloud, settings: HiddenSettings
) -> dict[str, np.ndarray]:
    """The world model's states on the real basis, whether each lies inside the real cloud, and how
    far each is from its nearest real state (``nearest_real``), beside the same distance of real states
    the fits did not use (``real_to_real``): the drift of dreamed states, in the z-scored units."""
    gen_pcs, gen_ics = _project(basis, gen.x)
    gen_z = (gen.x - cloud.mu) / cloud.sd
    reference = cloud.z[cloud.fit_in]
    inside = inside_fraction(reference, cloud.outliers.threshold, gen_z, settings.outlier_k)
    return {
        "episode": gen.episode,
        "step": gen.step,
        "pcs": gen_pcs,
        "ics": gen_ics,
        "inside": inside,
        "nearest_real": nearest_distance(reference, gen_z).astype(np.float32),
        "real_to_real": _real_to_real(cloud, settings.seed).astype(np.float32),
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
    median per simulated step, keyed as JSON keys it (does the dream leave the real cloud as it goes on?)."""

    def quantiles(d: np.ndarray) -> dict[str, float]:
        return {f"p{q}": float(np.percentile(d, q)) for q in (10, 50, 90, 99)}

    near, base = generated["nearest_real"], generated["real_to_real"]
    steps = np.unique(generated["step"])
    return {
        "nearest_real": quantiles(near),
        "real_to_real": quantiles(base),
        "median_ratio": float(np.median(near) / max(np.median(base), 1e-12)),
        "median_by_step": {str(int(t)): float(np.median(near[generated["step"] == t])) for t in steps},
    }


CLUSTERS = "Ward cluster"


def shown_points(arrays: dict, points: int, seed: int) -> np.ndarray:
    """The inliers among a seeded subsample of ``points`` points: what the scatter plots draw."""
    shown = subsample(len(arrays["pcs"]), points, seed + 1)
    return shown[~arrays["outlier"][shown]]


def colourings(a: dict, shown: np.ndarray, clusters: int) -> list[figures.Colouring]:
    """The panels of the scatter plots: the points ``shown`` coloured by each per-point quantity there is."""
    progress = a["step"] / np.maximum(1, _episode_lengths(a["episode"]))
    k, n_nmf = a["ics"].shape[1], a["nmf"].shape[1]
    panels = [
        figures.Colouring("action", a["action"][shown], ACTION_NAMES) if "action" in a else None,
        figures.Colouring("value", a["value"][shown]) if "value" in a else None,
        figures.Colouring("policy entropy (clean logits)", a["entropy"][shown]) if "entropy" in a else None,
        figures.Colouring("reward", a["reward"][shown]) if "reward" in a else None,
        figures.Colouring(CLUSTERS, a["clusters"][shown], [f"c{c}" for c in range(clusters)]),
        figures.Colouring("episode progress", progress[shown]),
        figures.Colouring("last step", a["last"][shown].astype(int), ["no", "last step"])
        if "last" in a
        else None,
        figures.Colouring("IC argmax", np.abs(a["ics"][shown]).argmax(1), [f"IC{m}" for m in range(k)]),
        figures.Colouring("NMF argmax", a["nmf"][shown].argmax(1), [f"NMF{m}" for m in range(n_nmf)]),
    ]
    return [p for p in panels if p is not None]


def _episode_lengths(episode: np.ndarray) -> np.ndarray:
    """Length of each point's episode (the number of its points)."""
    _, inverse, counts = np.unique(episode, return_inverse=True, return_counts=True)
    return counts[inverse]


__all__ = ["Hidden", "HiddenSettings", "drift_summary", "entropy", "hidden", "rollout_points"]
