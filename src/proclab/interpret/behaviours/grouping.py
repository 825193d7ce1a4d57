"""``proclab analyze behaviours``: simulated rollouts grouped into behaviours, and a saved transform.

A behaviour is a cluster of *state sequences* of agent and environment together (the seed's
combined agent-env analysis). Per sample and step ``t``, the feature vector is
``x_t = [agent state, top-16 env-state PCs]`` followed by its changes ``x_{t+l} - x_t`` at lags
``l = 2, 4, 6`` (so only the first ``T - 6`` steps of a sample have features). Then
StandardScaler -> PCA(64) -> 3-D t-SNE (openTSNE) -> Ward with a kNN connectivity graph, 32
clusters; a sample's behaviour is the modal cluster of its steps.

:class:`BehaviourModel` is the fitted transform, saved as plain arrays (``transform.npz``):
the env-state PCA, the scaler and the feature PCA, and the fitted points' PCA coordinates with
their clusters. :meth:`BehaviourModel.assign` puts new rollouts into behaviours: each new step
takes the majority cluster of its nearest fitted steps in PCA space (t-SNE has no out-of-sample
map; the neighbours are what it preserves), each sample the modal cluster of its steps.
``--assign SAMPLES`` runs it on another store (the intervention analyses do this).

:func:`behaviours` fits and describes the behaviours of a sample store object and returns a
:class:`Behaviours` result; ``proclab analyze behaviours`` (:mod:`proclab.interpret.behaviours.command`)
calls it and writes its files.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from proclab.envs.actions import ACTION_NAMES
from proclab.errors import ProclabError
from proclab.interpret.bases.activations import default_source, read_activation, replaying, store_source
from proclab.interpret.stats.clustering import check_clusters, ward_fit_assign
from proclab.interpret.workspace.figures import Colouring, scatter_figure, scatter_panel
from proclab.interpret.workspace.folder import Workspace
from proclab.interpret.workspace.selection import parse_ids
from proclab.io.files import figure_of, load_npz, save_npz
from proclab.io.progress import analysis_phases
from proclab.io.results import Result
from proclab.run.runtime import Runtime
from proclab.store import EpisodeStore

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from proclab.interpret.bases.pca_ica import Basis
    from proclab.models.edited import AgentLike

NAME = "behaviours"


@dataclass(frozen=True)
class BehaviourConfig:
    """The behaviour clustering's settings (the seed's defaults)."""

    lags: tuple[int, ...] = (2, 4, 6)
    env_pcs: int = 16
    pcs: int = 64
    clusters: int = 32
    perplexity: float = 30.0
    neighbours: int = 15
    """Fitted steps that vote when a new step is assigned."""


def lagged_features(state: np.ndarray, env: np.ndarray, lags: tuple[int, ...]) -> np.ndarray:
    """``(n, T, D)`` states and ``(n, T, E)`` env PCs -> ``(n, T - max(lags), (D + E) * (1 + len(lags)))``."""
    x = np.concatenate([state, env], -1)
    keep = x.shape[1] - max(lags)
    if keep < 1:
        raise ProclabError(
            f"samples of {x.shape[1]} steps are too short for lags {lags}; need > {max(lags)} steps"
        )
    return np.concatenate([x[:, :keep]] + [x[:, lag : lag + keep] - x[:, :keep] for lag in lags], -1)


def modal(labels: np.ndarray, n_clusters: int) -> np.ndarray:
    """``(n, S)`` step clusters -> ``(n,)`` the most frequent per row (lowest label on ties)."""
    counts = np.stack([(labels == c).sum(1) for c in range(n_clusters)], 1)
    return counts.argmax(1)


class BehaviourModel:
    """The fitted transform (see the module docstring); numpy arrays only, saved without pickle."""

    def __init__(self, config: BehaviourConfig, arrays: dict[str, np.ndarray]):
        self.config, self.a = config, arrays

    @classmethod
    def fit(cls, state: np.ndarray, env_h: np.ndarray, config: BehaviourConfig, seed: int = 0):
        """Fit on ``(n, T, D)`` states and ``(n, T, H)`` env states; returns (model, step labels, t-SNE)."""
        # lazy: openTSNE is slow to import, only t-SNE maps need it
        from openTSNE import TSNE

        # lazy: scikit-learn is slow to import, only the fits need it
        from sklearn.decomposition import PCA

        n, T = state.shape[:2]
        env_flat = env_h.reshape(n * T, -1).astype(np.float64)
        env_mean, env_std = env_flat.mean(0), _safe_std(env_flat)
        env_pca = PCA(min(config.env_pcs, *env_flat.shape), random_state=seed).fit(
            (env_flat - env_mean) / env_std
        )
        a = {
            "env_mean": env_mean,
            "env_std": env_std,
            "env_components": env_pca.components_,
            "env_pca_mean": env_pca.mean_,
        }
        feats = lagged_features(state, cls._env_pcs(a, env_h), config.lags)
        S = feats.shape[1]
        flat = feats.reshape(n * S, -1)
        a["mean"], a["std"] = flat.mean(0), _safe_std(flat)
        z = (flat - a["mean"]) / a["std"]
        pca = PCA(min(config.pcs, *z.shape), random_state=seed).fit(z)
        a["components"], a["pca_mean"] = pca.components_, pca.mean_
        coords = pca.transform(z)
        check_clusters(config.clusters, len(coords), "behaviours")
        perplexity = float(min(config.perplexity, max(1.0, (len(coords) - 1) / 3)))
        tsne = np.asarray(
            TSNE(
                n_components=3,
                # openTSNE leaves perplexity unannotated; its default, 30, makes pyright infer an int
                perplexity=perplexity,  # pyright: ignore[reportArgumentType]
                negative_gradient_method="bh",
                random_state=seed,
                n_jobs=1,
                initialization="pca",
            ).fit(coords)
        )
        steps = ward_fit_assign(tsne, np.arange(len(tsne)), config.clusters).reshape(n, S)
        a["fit_coords"], a["fit_labels"] = coords.astype(np.float32), steps.reshape(-1)
        return cls(config, a), steps, tsne.reshape(n, S, 3)

    @staticmethod
    def _env_pcs(a: dict, env_h: np.ndarray) -> np.ndarray:
        z = (env_h.astype(np.float64) - a["env_mean"]) / a["env_std"]
        return (z - a["env_pca_mean"]) @ a["env_components"].T

    def coords(self, state: np.ndarray, env_h: np.ndarray) -> np.ndarray:
        """PCA coordinates ``(n, S, pcs)`` of new samples' features."""
        a = self.a
        feats = lagged_features(state, self._env_pcs(a, env_h), self.config.lags)
        if feats.shape[-1] != a["mean"].shape[0]:
            raise ProclabError(
                f"these samples have {feats.shape[-1]} features per step; the behaviours were "
                f"fitted on {a['mean'].shape[0]} (another agent or world model?)"
            )
        return ((feats - a["mean"]) / a["std"] - a["pca_mean"]) @ a["components"].T

    def assign(self, state: np.ndarray, env_h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Behaviour of each new sample ``(n,)`` and cluster of each of its steps ``(n, S)``."""
        # lazy: scikit-learn is slow to import, only the fits need it
        from sklearn.neighbors import KNeighborsClassifier

        c = self.coords(state, env_h)
        n, S = c.shape[:2]
        k = min(self.config.neighbours, len(self.a["fit_labels"]))
        knn = KNeighborsClassifier(k).fit(self.a["fit_coords"], self.a["fit_labels"])
        steps = knn.predict(c.reshape(n * S, -1).astype(np.float32)).reshape(n, S)
        return modal(steps, self.config.clusters), steps

    def save(self, path: Path) -> None:
        save_npz(path, "behaviour model", config=np.array(json.dumps(asdict(self.config))), **self.a)

    @classmethod
    def load(cls, path: Path) -> BehaviourModel:
        if not Path(path).is_file():
            raise ProclabError(
                f"no saved behaviours at {str(path)!r}; run `proclab analyze behaviours` first"
            )
        arrays = load_npz(path, "behaviour model")
        try:
            config = json.loads(str(arrays.pop("config")))
            return cls(BehaviourConfig(**{**config, "lags": tuple(config["lags"])}), arrays)
        except (ValueError, KeyError, TypeError) as err:
            raise ProclabError(f"behaviour model {str(path)!r} is corrupt ({err!r})") from None


def _safe_std(x: np.ndarray) -> np.ndarray:
    s = x.std(0)
    return np.where(s > 1e-12, s, 1.0)


@dataclass(frozen=True)
class SampleSet:
    """Per-sample arrays of a sample store, batch-first ``(n, T, ...)``."""

    ids: np.ndarray
    state: np.ndarray
    env_h: np.ndarray
    value: np.ndarray
    action: np.ndarray
    done: np.ndarray
    returns: np.ndarray
    source: str

    @classmethod
    def read(
        cls,
        store: EpisodeStore,
        ids: list[int],
        source: str,
        checkpoint: Path | None = None,
        runtime: Runtime | None = None,
        agent=None,
    ) -> SampleSet:
        """The samples' activations of ``source``; a hook source replays ``agent`` (any agent in memory), else
        ``checkpoint``'s, on their frames (on ``runtime``, default the CPU)."""
        lengths = store.episodes["length"][ids]
        if len(set(lengths.tolist())) != 1:
            raise ProclabError(
                f"samples of {str(store.path)!r} have different lengths; use one `wm sample` run"
            )
        n, T = len(ids), int(lengths[0])
        acts = read_activation(store, source, ids, checkpoint=checkpoint, agent=agent, runtime=runtime)

        def steps(name: str) -> np.ndarray:
            v = store.read_steps(name, ids)
            return v.reshape(n, T, *v.shape[1:])

        returns = store.episodes["return"][ids] if "return" in store.episodes else np.full(n, np.nan)
        done = steps("terminated") if "terminated" in store.step_fields else np.zeros((n, T), bool)
        return cls(
            np.asarray(ids),
            acts.x.reshape(n, T, -1),
            steps("env_h"),
            steps("value"),
            steps("action"),
            done,
            returns.astype(np.float64),
            acts.source,
        )


def open_samples(given: Path | None, ws: Workspace) -> tuple[EpisodeStore, Path]:
    """The sample store ``given`` (``--samples``) or recorded in the folder (recorded if new)."""
    samples = given or ws.inputs.get("samples")
    if samples is None:
        raise ProclabError("no sample store: pass --samples SAMPLES (proclab wm sample)")
    ws.require_inputs(samples=Path(samples))
    return EpisodeStore(samples), Path(samples)


def source_of(ws: Workspace, store: EpisodeStore) -> str:
    return ws.inputs.get("activation") or default_source(store)


def behaviour_summary(s: SampleSet, labels: np.ndarray, n_clusters: int, basis=None) -> dict:
    """Per behaviour: members, mean value, return, done rate, action histogram, most distinctive ICs."""
    by_ic = None  # each step's ICs, and their mean and spread over every step
    if basis is not None:
        flat = basis.to_ics(s.state.reshape(-1, s.state.shape[-1]).astype(np.float64))
        by_ic = flat.reshape(*s.state.shape[:2], -1), flat.mean(0), _safe_std(flat)
    out = []
    for c in range(n_clusters):
        m = labels == c
        entry = {"behaviour": c, "members": s.ids[m].tolist(), "size": int(m.sum())}
        if m.any():
            hist = np.bincount(s.action[m].reshape(-1), minlength=len(ACTION_NAMES))
            entry |= {
                "mean_value": float(s.value[m].mean()),
                "mean_return": float(np.nanmean(s.returns[m])),
                "done_rate": float(s.done[m].any(1).mean()),
                "action_histogram": dict(zip(ACTION_NAMES, hist.tolist(), strict=False)),
            }
            if by_ic is not None:
                ics, mu, sd = by_ic
                z = (ics[m].reshape(-1, ics.shape[-1]).mean(0) - mu) / sd
                top = np.argsort(-np.abs(z))[:3]
                entry["distinctive_ics"] = [{"ic": int(i), "z": float(z[i])} for i in top]
        out.append(entry)
    return {"behaviours": out}


@dataclass(frozen=True)
class BehaviourSettings:
    """How :func:`behaviours` fits (the options of ``proclab analyze behaviours``, same names and
    meanings)."""

    ids: tuple[int, ...] | str | None = None
    """The samples grouped: their ids, or a selection such as ``"0:100"`` (None: every sample)."""
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
    """Refit with seed + 1 and report the adjusted Rand index of the two labelings."""
    seed: int = 0
    """The fit's PCAs and t-SNE."""

    def __post_init__(self):
        if self.ids is not None and not isinstance(self.ids, str):
            object.__setattr__(self, "ids", tuple(int(i) for i in self.ids))
        object.__setattr__(self, "lags", tuple(self.lags))

    def check(self) -> None:
        for name in ("clusters", "pcs", "env_pcs"):
            if getattr(self, name) < 1:
                raise ProclabError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if not self.lags or min(self.lags) < 1:
            raise ProclabError(f"--lags must be one or more steps >= 1, got {list(self.lags)}")
        if not self.perplexity > 0:
            raise ProclabError(f"--perplexity must be > 0, got {self.perplexity}")

    @property
    def config(self) -> BehaviourConfig:
        return BehaviourConfig(self.lags, self.env_pcs, self.pcs, self.clusters, self.perplexity)


@dataclass(frozen=True, repr=False)
class Behaviours(Result):
    """The behaviours of the samples: per behaviour its members and statistics (``behaviours``, what the
    command's ``summary.json`` holds with the fit's facts), each sample's behaviour (``labels``), each of its
    steps' cluster and 3-D t-SNE point, and the fitted transform (``model``, to assign new samples)."""

    behaviours: list[dict]
    samples: int
    stability_ari: float | None
    config: dict
    source: str
    ids: np.ndarray = field(repr=False)
    labels: np.ndarray = field(repr=False)
    step_labels: np.ndarray = field(repr=False)
    tsne: np.ndarray = field(repr=False)
    model: BehaviourModel = field(repr=False, compare=False, metadata={"saved": False})  # transform.npz

    def summary(self) -> dict:
        """What ``summary.json`` holds (every field but the arrays and the model)."""
        return {"behaviours": self.behaviours} | {
            k: getattr(self, k) for k in ("samples", "stability_ari", "config", "source")
        }

    def table(self) -> list[dict]:
        rows = []
        for b in self.behaviours:
            row = {"behaviour": b["behaviour"], "size": b["size"]}
            if b["size"]:
                hist = b["action_histogram"]
                row |= {
                    "mean value": b["mean_value"],
                    "mean return": b["mean_return"],
                    "done rate": b["done_rate"],
                    "top action": max(hist, key=hist.get),
                }
            rows.append(row)
        return rows

    def plot(self, ax: Axes | None = None, dims: tuple[int, int] = (0, 1)) -> Figure:
        """The steps on two of the three t-SNE dimensions, coloured by their cluster (as ``tsne_01.png``)."""
        xy = self.tsne.reshape(-1, 3)[:, list(dims)]
        axes = (f"t-SNE {dims[0]}", f"t-SNE {dims[1]}")
        if ax is not None:
            scatter_panel(ax, xy, step_colouring(self.step_labels), axes)
            return figure_of(ax)
        return scatter_figure(xy, [step_colouring(self.step_labels)], "behaviours: 3-D t-SNE", axes)

    def _write_files(self, folder: Path) -> None:
        """The transform beside the result, ``folder/transform.npz``."""
        self.model.save(folder / TRANSFORM)

    @classmethod
    def _read_files(cls, folder: Path, fields: dict) -> dict:
        return {"model": BehaviourModel.load(folder / TRANSFORM)}


TRANSFORM = "transform.npz"


def step_colouring(step_labels: np.ndarray) -> Colouring:
    """Every step coloured by its cluster (the t-SNE maps' one panel)."""
    labels = step_labels.reshape(-1)
    return Colouring("behaviour (step cluster)", labels, [str(c) for c in range(int(labels.max()) + 1)])


def behaviours(
    samples: EpisodeStore,
    hook: str | None = None,
    *,
    agent: AgentLike | None = None,
    basis: Basis | None = None,
    settings: BehaviourSettings = BehaviourSettings(),
    progress: bool = True,
) -> Behaviours:
    """The behaviours of the samples ``settings.ids`` of a world model's sample store (module docstring): their
    states at ``hook`` (a hook point, read as recorded where it is a state the store holds, else replayed by
    ``agent``, any agent in memory; or a name of the store's, ``state_in/core.0.h``; default: the first state
    tensor) with the env states; ``basis`` adds each behaviour's most distinctive ICs. ``progress``: show the
    fits as they run."""
    settings.check()
    source = store_source(samples, hook)
    agent = replaying(samples, source, agent)
    ids = settings.ids
    chosen = (
        parse_ids(ids or "0:", samples.num_episodes) if ids is None or isinstance(ids, str) else list(ids)
    )
    with analysis_phases(progress, 3 + settings.stability, "behaviours") as ph:
        with ph.phase("reading samples"):
            s = SampleSet.read(samples, chosen, source, agent=agent)
        config = settings.config
        with ph.phase("fitting"):
            model, steps, tsne = BehaviourModel.fit(s.state, s.env_h, config, settings.seed)
            labels = modal(steps, settings.clusters)
        stability = None
        if settings.stability:
            with ph.phase("stability refit"):
                # lazy: scikit-learn is slow to import, only the fits need it
                from sklearn.metrics import adjusted_rand_score

                _, steps2, _ = BehaviourModel.fit(s.state, s.env_h, config, settings.seed + 1)
                stability = float(adjusted_rand_score(labels, modal(steps2, settings.clusters)))
        with ph.phase("statistics"):
            described = behaviour_summary(s, labels, settings.clusters, basis)["behaviours"]
    facts = {**asdict(config), "lags": list(config.lags)}  # as JSON holds it: a saved result loads equal
    return Behaviours(described, len(chosen), stability, facts, s.source, s.ids, labels, steps, tsne, model)
