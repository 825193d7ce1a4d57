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
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, ClassVar

import numpy as np
import tyro

from proclab.envs.actions import ACTION_NAMES
from proclab.errors import ProclabError
from proclab.interpret.bases.activations import default_source, read_activation
from proclab.interpret.stats.clustering import check_clusters, ward_fit_assign
from proclab.interpret.workspace.args import SAMPLES, AnalysisArgs
from proclab.interpret.workspace.figures import Colouring, scatter_grid
from proclab.interpret.workspace.folder import Workspace
from proclab.interpret.workspace.progress import phases
from proclab.interpret.workspace.selection import parse_ids
from proclab.io.files import load_npz, save_npz
from proclab.io.run_dirs import write_json_atomic
from proclab.io.video import annotate, to_hwc, upscale, write_video
from proclab.run.runtime import Runtime
from proclab.store import EpisodeStore

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
                perplexity=perplexity,
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
    ) -> SampleSet:
        """The samples' activations of ``source``; a hook source replays ``checkpoint`` on their frames (on
        ``runtime``, default the CPU)."""
        lengths = store.episodes["length"][ids]
        if len(set(lengths.tolist())) != 1:
            raise ProclabError(
                f"samples of {str(store.path)!r} have different lengths; use one `wm sample` run"
            )
        n, T = len(ids), int(lengths[0])
        acts = read_activation(store, source, ids, checkpoint=checkpoint, runtime=runtime)

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


def open_samples(args, ws: Workspace) -> tuple[EpisodeStore, Path]:
    """The sample store named by ``--samples`` or recorded in the folder (recorded if new)."""
    samples = args.samples or ws.inputs.get("samples")
    if samples is None:
        raise ProclabError("no sample store: pass --samples SAMPLES (proclab wm sample)")
    ws.require_inputs(samples=Path(samples))
    return EpisodeStore(samples), Path(samples)


def source_of(ws: Workspace, store: EpisodeStore) -> str:
    return ws.inputs.get("activation") or default_source(store)


def run_behaviours(args: BehavioursArgs) -> Path:
    start = time.time()
    ws = Workspace.open(args.out)
    store, _ = open_samples(args, ws)
    if args.assign is not None:
        return _run_assign(args, ws, ws.path / NAME, start)
    out = ws.command_dir(NAME)
    config = BehaviourConfig(args.lags, args.env_pcs, args.pcs, args.clusters, args.perplexity)
    ids = parse_ids(args.ids, store.num_episodes)
    with phases(4 + int(args.stability), "behaviours") as ph:
        with ph.phase("reading samples"):
            s = SampleSet.read(store, ids, source_of(ws, store), ws.agent_checkpoint(), args.runtime())
        with ph.phase("fitting"):
            model, steps, tsne = BehaviourModel.fit(s.state, s.env_h, config, args.seed)
            labels = modal(steps, args.clusters)
        stability = None
        if args.stability:
            with ph.phase("stability refit"):
                # lazy: scikit-learn is slow to import, only the fits need it
                from sklearn.metrics import adjusted_rand_score

                _, steps2, _ = BehaviourModel.fit(s.state, s.env_h, config, args.seed + 1)
                stability = float(adjusted_rand_score(labels, modal(steps2, args.clusters)))
        with ph.phase("statistics"):
            model.save(out / "transform.npz")
            save_npz(
                out / "labels.npz",
                "behaviour labels",
                ids=s.ids,
                labels=labels,
                step_labels=steps,
                tsne=tsne,
                clusters=args.clusters,
            )
            basis, _ = ws.optional_basis(needed=False)
            summary = behaviour_summary(s, labels, args.clusters, basis)
            summary |= {
                "samples": len(ids),
                "stability_ari": stability,
                "config": asdict(config),
                "source": s.source,
                "seconds": ph.seconds,
            }
            write_json_atomic(out / "summary.json", summary)
        with ph.phase("plots and videos"):
            outputs = _plots(out, tsne, steps) + _videos(out, store, s, labels, args.videos)
    ws.record_command(
        NAME,
        asdict(args),
        [str(out / f) for f in ("transform.npz", "labels.npz", "summary.json")] + [str(p) for p in outputs],
        time.time() - start,
    )
    return ws.final(out)


def _run_assign(args: BehavioursArgs, ws: Workspace, out: Path, start: float) -> Path:
    model = BehaviourModel.load(out / "transform.npz")
    new = EpisodeStore(args.assign)
    ids = parse_ids("0:", new.num_episodes)
    s = SampleSet.read(new, ids, source_of(ws, new), ws.agent_checkpoint(), args.runtime())
    labels, steps = model.assign(s.state, s.env_h)
    path = out / f"assigned_{Path(args.assign).name.removesuffix('.zarr')}.npz"
    save_npz(path, "behaviour assignments", ids=s.ids, labels=labels, step_labels=steps)
    ws.record_command(f"{NAME}-assign", asdict(args), [str(path)], time.time() - start)
    return out


def behaviour_summary(s: SampleSet, labels: np.ndarray, n_clusters: int, basis=None) -> dict:
    """Per behaviour: members, mean value, return, done rate, action histogram, most distinctive ICs."""
    ics = None
    if basis is not None:
        flat = basis.to_ics(s.state.reshape(-1, s.state.shape[-1]).astype(np.float64))
        ics = flat.reshape(*s.state.shape[:2], -1)
        mu, sd = flat.mean(0), _safe_std(flat)
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
            if ics is not None:
                z = (ics[m].reshape(-1, ics.shape[-1]).mean(0) - mu) / sd
                top = np.argsort(-np.abs(z))[:3]
                entry["distinctive_ics"] = [{"ic": int(i), "z": float(z[i])} for i in top]
        out.append(entry)
    return {"behaviours": out}


def _plots(out: Path, tsne: np.ndarray, steps: np.ndarray) -> list[Path]:
    xyz = tsne.reshape(-1, 3)
    labels = steps.reshape(-1)
    names = [str(c) for c in range(int(labels.max()) + 1)]
    paths = []
    for a, b in ((0, 1), (0, 2), (1, 2)):
        paths.append(
            scatter_grid(
                xyz[:, [a, b]],
                [Colouring("behaviour (step cluster)", labels, names)],
                out / f"tsne_{a}{b}.png",
                "behaviours: 3-D t-SNE",
                (f"t-SNE {a}", f"t-SNE {b}"),
            )
        )
    return paths


def _videos(out: Path, store: EpisodeStore, s: SampleSet, labels: np.ndarray, k: int) -> list[Path]:
    """A 3x3 grid video of up to 9 members per behaviour, with the agent's action drawn on each tile."""
    sizes = np.bincount(labels)
    paths = []
    for c in np.argsort(-sizes, kind="stable")[:k]:
        members = np.flatnonzero(labels == c)[:9]
        if not len(members):
            continue
        tiles = []
        for m in members:
            frames = upscale(to_hwc(store.read(int(s.ids[m]), ["obs"])["obs"]), 2)
            tiles.append(np.stack([annotate(f, int(a)) for f, a in zip(frames, s.action[m], strict=True)]))
        while len(tiles) < 9:
            tiles.append(np.zeros_like(tiles[0]))
        rows = [np.concatenate(tiles[r * 3 : r * 3 + 3], 2) for r in range(3)]
        paths.append(
            write_video(out / "videos" / f"behaviour_{int(c):02d}.mp4", np.concatenate(rows, 1), fps=4)
        )
    return paths
