"""The atlas as a command on an analysis folder: ``proclab analyze atlas``, and the quickstart's stage.

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
from dataclasses import asdict
from pathlib import Path

import numpy as np
from PIL import Image

from proclab.errors import ProclabError
from proclab.interpret.atlas.build import (
    FORMAT,
    NAME,
    PREDICTION,
    Atlas,
    AtlasArgs,
    AtlasInputs,
    build_atlas,
    prediction_figure,
    settings_of,
)
from proclab.interpret.atlas.causes import load_sweep
from proclab.interpret.atlas.episodes import StoreEpisodes
from proclab.interpret.atlas.strips import write_strip
from proclab.interpret.bases.activations import read_activation
from proclab.interpret.bases.sparse_dictionary import FILE, DictionaryConfig, SparseDictionary
from proclab.interpret.interventions.edit_target import agent_checkpoint
from proclab.interpret.saliency.world_model import basis_hook
from proclab.interpret.workspace.figures import save_tight
from proclab.interpret.workspace.folder import Workspace
from proclab.interpret.workspace.systems import file_digest, open_coordinates, suffix, system_file
from proclab.io.progress import phases
from proclab.io.run_dirs import write_json_atomic
from proclab.models.loading import freeze, load_agent
from proclab.store import EpisodeStore
from proclab.store.state_codec import StateCodec


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
        res = build_atlas(inp, settings_of(args))
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
