"""The atlas as a command on an analysis folder: ``proclab analyze atlas`` (and the quickstart's stage), and
``proclab analyze compare-bases`` (:mod:`.comparison_report`).

Resolves what :func:`~proclab.interpret.atlas.build.build_atlas` needs from the folder (the real store and
the activation ``analyze hidden`` analysed, the agent, the coordinates, fitting the sparse dictionary
when asked, and the sweep of the same basis when one was run on its current fit), builds the cards
(the :class:`~proclab.interpret.atlas.build.Atlas` that ``proclab.analyze.atlas`` returns for a rollout)
and writes ``ANALYSIS/atlas[-<basis>]/`` from it. The wall time of each phase and the process' peak resident
memory are recorded in ``atlas.json``.
"""

from __future__ import annotations

import resource
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
from PIL import Image

from proclab.errors import ProclabError
from proclab.interpret.atlas.build import (
    FORMAT,
    NAME,
    PREDICTION,
    Atlas,
    AtlasInputs,
    AtlasSettings,
    build_atlas,
    prediction_figure,
)
from proclab.interpret.atlas.causes import load_sweep
from proclab.interpret.atlas.comparison_report import NAME as COMPARE
from proclab.interpret.atlas.comparison_report import BasesComparison, table, write_comparison
from proclab.interpret.atlas.episodes import StoreEpisodes
from proclab.interpret.atlas.strips import write_strip
from proclab.interpret.bases.activations import read_activation
from proclab.interpret.bases.sparse_dictionary import FILE, DictionaryConfig, SparseDictionary
from proclab.interpret.interventions.edit_target import agent_checkpoint
from proclab.interpret.saliency.world_model import basis_hook
from proclab.interpret.workspace.command import AGENT, DATA, AnalysisArgs
from proclab.interpret.workspace.figures import save_tight
from proclab.interpret.workspace.folder import Workspace
from proclab.interpret.workspace.systems import (
    check_system,
    file_digest,
    open_coordinates,
    suffix,
    system_file,
)
from proclab.io.arguments import settings_from
from proclab.io.progress import phases
from proclab.io.run_dirs import write_json_atomic
from proclab.models.loading import freeze, load_agent
from proclab.store import EpisodeStore
from proclab.store.state_codec import StateCodec


@dataclass(frozen=True)
class AtlasArgs(AnalysisArgs):
    """Direction atlas: per direction, what activates it, what it tracks, causes and looks at (one card each)."""

    PRESETS: ClassVar[dict[str, dict]] = {
        "paper": {},
        "small": {
            "episodes": 100,
            "bootstrap": 300,
            "saliency_moments": 4,
            "noise": 4,
            "predict_steps": 500,
            "dictionary_steps": 1000,
            "stability_seeds": 2,
            "stability_bootstraps": 3,
        },
    }

    seed: int = 0
    """Seed of the bootstraps, the states sampled for the gradient prediction and the sparse dictionary."""
    basis: str = "ica"
    """Directions described: ica, pca (the folder's basis), nmf (analyze hidden's NMF), sparse (an
    overcomplete top-k dictionary, fitted here when the folder has none) or units (the state's own units,
    z-scored as the basis z-scores them)."""
    precision: str = field(default="auto", kw_only=True)
    """Arithmetic: fp32, bf16 or auto. The atlas replays the agent and takes its gradients in fp32 whatever
    this says (saliency and the gradient prediction need fp32)."""
    data: DATA = None
    """Episode store of real episodes (default: the folder's)."""
    agent: AGENT = None
    """Agent replayed for hook states, saliency and gradients: a proclab run or checkpoint directory
    (default: the folder's, else the one that recorded DATA)."""
    episodes: int = 1000
    """Recorded episodes described (the store's first N; all if it has fewer)."""
    moments: int = 4
    """Top and bottom moments shown per direction (one per episode), each as a frame strip."""
    bootstrap: int = 1000
    """Resamples of episodes for the correlations' intervals, and of directions for the Spearman one."""
    lags: int = 8
    """Lead/lag: correlations at -lags .. lags steps."""
    saliency_moments: int = 8
    """Most active moments (one per episode) whose saliency maps are averaged per direction (0: none)."""
    noise: int = 8
    """SmoothGrad: noised copies of each frame (0: the plain gradient)."""
    sigma: float = 0.05
    """SmoothGrad: noise std on frames in [0, 1]."""
    predict_steps: int = 2000
    """Recorded states (a seeded sample) at which gradients predict each edit's effect."""
    refit: bool = False
    """--basis sparse: fit the dictionary again even if the folder has one (a sweep of the old one is then
    no longer used)."""
    expansion: int = 4
    """--basis sparse: atoms per state unit."""
    atoms_k: int = 8
    """--basis sparse: atoms active per state (top-k)."""
    dictionary_steps: int = 4000
    """--basis sparse: training steps of the dictionary."""
    random_directions: int = 0
    """Also measure what this many random unit directions of the basis's span track: the share of directions
    that track some quantity beside the share of random ones (and the sweep's own random baseline, when its
    sweep ran with --random-directions)."""
    stability_seeds: int = 5
    """Refits of the basis on the same states with new seeds, for each direction's stability (0: none)."""
    stability_bootstraps: int = 5
    """Refits on resamples of whole episodes (new seeds too): a direction found again by every refit is
    stable; the atlas flags the others and rests no claim on them (0 and --stability-seeds 0: not measured)."""

    def settings(self) -> AtlasSettings:
        """The library's settings of this command line (``--basis`` picks the folder's coordinates itself:
        ``kind``, the library's in-memory choice, is unused here)."""
        return settings_from(self, AtlasSettings, kind="ica")

    def check(self) -> None:
        check_system(self.basis)
        self.require_positive("episodes")
        self.settings().check()


def _states(ws: Workspace, args: AtlasArgs, rt, ph):
    """The real store, the described episodes and their states (the activation of the folder's basis)."""
    store = EpisodeStore(ws.input_path("data", args.data, "--data DATA"))
    source = ws.activation()
    if store.num_episodes == 0:
        raise ProclabError(f"episode store {str(store.path)!r} holds no episodes")
    episodes = np.arange(min(args.episodes, store.num_episodes))
    with ph.phase("reading states"):
        acts = read_activation(
            store, source, episodes, checkpoint=_checkpoint(ws, args), runtime=rt, progress=ph.fraction
        )
    return store, episodes, acts.x, source


def _checkpoint(ws: Workspace, args: AtlasArgs) -> Path:
    return agent_checkpoint(ws, args.agent, "analyze atlas")


def _coordinates(ws: Workspace, args: AtlasArgs, x: np.ndarray, ph):
    """The folder's coordinates ``args.basis``; a sparse dictionary is fitted on ``x`` first when the folder
    has none or ``--refit`` asks (and saved as ``ANALYSIS/dictionary.npz``)."""
    if args.basis == "sparse" and (args.refit or not (ws.path / FILE).is_file()):
        config = DictionaryConfig(
            expansion=args.expansion, k=args.atoms_k, steps=args.dictionary_steps, seed=args.seed
        )
        with ph.phase("sparse dictionary"):
            SparseDictionary.fit(x, config, progress=ph.fraction).save(ws.path / FILE)
    coords = open_coordinates(ws, args.basis)
    if coords.dim != x.shape[1]:
        raise ProclabError(
            f"the folder's {args.basis} coordinates describe {coords.dim}-d states, the store's activation "
            f"has {x.shape[1]}; use the store the folder was made with"
        )
    return coords


def run_atlas(args: AtlasArgs) -> Path:
    """Build the atlas of ``args.basis`` on the analysis folder ``args.out``; returns its output folder."""
    start = time.perf_counter()
    args.check()
    ws = Workspace.open(args.out, create=False)
    checkpoint = _checkpoint(ws, args)
    ws.require_inputs(checkpoint=checkpoint)
    rt = args.runtime()
    agent, _, _ = load_agent(checkpoint, rt)
    freeze(agent)
    out = ws.command_dir(NAME + suffix(args.basis))
    for sub in ("strips", "saliency"):
        shutil.rmtree(out / sub, ignore_errors=True)
    with phases(10 if args.basis == "sparse" else 9, "analyze atlas") as ph:
        store, episodes, x, source = _states(ws, args, rt, ph)
        coords = _coordinates(ws, args, x, ph)
        sweep, note = load_sweep(ws.path / ("sweep" + suffix(args.basis)), system_file(ws, args.basis))
        hook = basis_hook(source, StateCodec(agent.state_shapes()))
        inp = AtlasInputs(StoreEpisodes(store, episodes), x, coords, agent, hook, sweep, note)
        res = build_atlas(inp, args.settings())
        with ph.phase("writing"):
            head = _head(ws, args, source, checkpoint, len(episodes), sweep)
            files = _write(out, res, head, ph.seconds, start)
    ws.record_command(
        out.name, asdict(args), [str(f.relative_to(ws.path)) for f in files], time.perf_counter() - start
    )
    return ws.final(out)


def _head(ws, args, source, checkpoint, episodes, sweep) -> dict:
    """What ``atlas.json`` says of the folder the atlas was built on."""
    return {
        "format": FORMAT,
        "version": 1,
        "basis": args.basis,
        "basis_file": str(system_file(ws, args.basis)),
        "basis_digest": file_digest(system_file(ws, args.basis)),
        "data": str(Path(ws.inputs["data"])),
        "activation": source,
        "checkpoint": str(checkpoint),
        "episodes": episodes,
        "bootstrap": args.bootstrap,
        "sweep": None
        if sweep is None
        else {
            "folder": "sweep" + suffix(args.basis),
            "levels": len(sweep["levels"]),
            "arms": list(sweep["arms"]),
            "correction": sweep["correction"],
        },
    }


def _write(out: Path, res: Atlas, head: dict, seconds: dict, start: float) -> list[Path]:
    for name, image in res.images.items():
        if name.startswith("strips/"):
            write_strip(out / name, image)
        else:
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(image).save(out / name)
    if "points" in res.prediction:
        save_tight(prediction_figure(res.prediction["points"], res.prediction["pairings"]), out / PREDICTION)
    gradients = res.gradients
    arrays = out / "saliency.npz"
    tmp = out / ".saliency.tmp.npz"
    np.savez(
        tmp,
        directions=np.array(sorted(gradients), np.int64),
        gradient=np.array([gradients[m] for m in sorted(gradients)]),
    )
    tmp.replace(arrays)
    lines = [
        f"{c['label']:<10} active {100 * c['activation']['active']:5.1f} %  kurtosis {c['activation']['kurtosis']:7.2f}  {c['summary']}"
        for c in res.cards
    ]
    (out / "atlas.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    doc = {**head, **res.summary()}
    doc["seconds"] = dict(seconds)
    doc["wall_seconds"] = round(time.perf_counter() - start, 3)
    doc["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    write_json_atomic(out / "atlas.json", plain(doc))
    return [out / "atlas.json", out / "atlas.txt", arrays, out / "strips", out / "saliency"]


def plain(value):
    """``value`` with numpy scalars and arrays as Python numbers and lists, and NaN or infinity as None
    (strict JSON: a browser's ``JSON.parse`` accepts no NaN)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, (np.integer, np.bool_)):
        return value.item()
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    return value


# -- analyze compare-bases --------------------------------------------------------------------------
@dataclass(frozen=True)
class CompareBasesArgs(AnalysisArgs):
    """Compare bases: coordinate systems (ICs, units, ...) side by side on their atlases and sweeps.

    How strongly their directions track what the atlas measures, how many track ground truth, how many
    matter when edited; with intervals and differences.

    Runs no network (it reads the atlases and sweeps): the runtime options change nothing."""

    seed: int = 0
    """Seed of the resamples of directions."""
    basis: tuple[str, ...] = ("ica", "units")
    """Systems compared (ica, pca, nmf, sparse, units), each with its atlas on the same episodes (analyze atlas
    --basis B) and, for the share that matters when edited, its sweep (analyze sweep --basis B)."""
    reference: str = "ica"
    """The system every other is compared with: differences of means, medians and shares with 95 % intervals."""
    threshold: float = 0.3
    """A direction has a ground-truth correlate when a gt quantity is tracked (as on its card) with |r| at or
    above this, at lag 0."""
    bootstrap: int = 2000
    """Resamples of the directions for the intervals of means, medians and their differences."""


def run_compare_bases(args: CompareBasesArgs) -> Path:
    """Compare the systems of ``args.basis`` in the analysis folder ``args.out``; returns the output folder."""
    start = time.perf_counter()
    settings = settings_from(args, BasesComparison)
    settings.check()
    ws = Workspace.open(args.out, create=False)
    folder, files, doc = write_comparison(ws, settings, start)
    print(table(doc), end="")
    outputs = [str(ws.final(f).relative_to(ws.path)) for f in files]
    ws.record_command(COMPARE, asdict(args), outputs, doc["seconds"])
    return ws.final(folder)
