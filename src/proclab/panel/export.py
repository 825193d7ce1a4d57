"""An analysis folder as a static web panel (``proclab panel export``).

Reads what the ``proclab analyze`` commands left in the folder and what they point at: the
basis (``basis.npz``), the sample store and real store recorded in ``analysis.json``, the
saliency stores (``ANALYSIS/<name>/store.zarr``, simulated and ``--real``), the behaviours
(``behaviours/labels.npz``), intervention summaries and videos when present, and the agent's
training run (``metrics.csv`` beside its checkpoints) and eval results (``proclab eval --out``
JSON files in that run directory, or ``--eval``). Everything is projected with the folder's
own basis, so the panel's coordinates are those of every analysis of the folder. Real episodes
recorded with ground truth carry its positions (agent, goal, nearest of each kind) as pixel markers
the episode viewer draws over the frames (:mod:`proclab.panel.truth`).

A simulated sample's gradient loadings come from the saliency store (``grad/<target>/ic``);
samples outside the saliency run get NaN there (no filter range matches NaN) and no saliency
strip. Real episodes are the windows of a ``--real`` saliency run (agent-alone maps), or,
without one, the first steps of the first real episodes with their frames only. The folder's
direction atlases (``ANALYSIS/atlas*/``) become the front page, and a window around each card's
first moments is added so a card links into the episode viewer (:mod:`proclab.panel.atlas_export`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from proclab.envs import ACTION_NAMES
from proclab.errors import ProclabError
from proclab.interpret.bases.activations import read_activation
from proclab.interpret.bases.pca_ica import Basis
from proclab.interpret.saliency.pictures import overlay, process
from proclab.interpret.workspace.folder import Workspace
from proclab.io.files import load_npz, read_json
from proclab.io.progress import progress_bar
from proclab.io.run_dirs import read_metrics
from proclab.panel.atlas_export import atlas_section, find_atlases, linked_moments
from proclab.panel.bundle import PanelData, extrema, histograms, rounded, write_panel
from proclab.panel.truth import truth_markers
from proclab.store.store import EpisodeStore


@dataclass(frozen=True)
class PanelSettings:
    """What :func:`export` puts in a panel (``proclab panel export``'s options of these names)."""

    samples: int = 1000  # simulated samples to include (the sample store's first N)
    real: int = 50  # real episodes (windows of the --real saliency run, else the store's first episodes)
    background: int = 3000  # real states drawn as the scatter's background cloud (a seeded random subset)
    eval: tuple[Path, ...] = ()  # proclab eval --out files (empty: eval*.json in the agent's run directory)
    chunk: int = 500  # samples per chunk of the per-step arrays (the page fetches a chunk when it needs one)
    atlas_moments: int = 1  # per atlas card, its first N top and bottom moments in the episode viewer
    title: str | None = None  # page title (None: the analysis folder's name)
    seed: int = 0  # seed of the background subset


MAX_PCS = 16
"""PCs offered on the scatter's axes (the leading ones; the basis may have D of them)."""
EVAL_COLUMNS = (
    "split",
    "game",
    "episodes",
    "return_mean",
    "return_std",
    "length_mean",
    "level_complete_rate",
    "normalized_score",
)


@dataclass
class Rows:
    """Per-sample data being assembled, one entry per panel sample (simulated first, then real)."""

    samples: list[dict]
    ics: list[np.ndarray]
    pcs: list[np.ndarray]
    grads: list[dict[str, np.ndarray]]
    strips: dict[str, np.ndarray]


def _strip(frames: np.ndarray) -> np.ndarray:
    """``(T, 3, H, W)`` uint8 frames -> one ``(H, T*W, 3)`` image."""
    return np.ascontiguousarray(np.concatenate(list(frames.transpose(0, 2, 3, 1)), axis=1))


def _saliency_stores(ws) -> tuple[list[tuple], tuple | None]:
    """The folder's saliency stores as (name, store, settings): all simulated ones (by name, so
    ``saliency`` comes before ``saliency-ic``), and the first ``--real`` one or None."""
    sim, real = [], []
    for path in sorted(ws.path.glob("*/store.zarr")):
        store = EpisodeStore(path)
        settings = store.shards[0].attrs.get("saliency") if store.shards else None
        if settings is not None:
            (real if "data" in settings else sim).append((path.parent.name, store, settings))
    return sim, real[0] if real else None


def _grad_keys(store) -> list[str]:
    return sorted(
        {f.split("/")[1] for f in store.step_fields if f.startswith("grad/") and f.endswith("/frame")}
    )


def _saliency_rows(entry, ids_wanted, episode_field: str) -> dict[int, int]:
    """Saliency-store episode per wanted id (the with-env-grads one where both settings ran)."""
    if entry is None:
        return {}
    _, store, _ = entry
    ids = store.read_episode_field(episode_field)
    env = (
        store.read_episode_field("env_grads")
        if "env_grads" in store.episode_fields
        else np.ones(len(ids), bool)
    )
    wanted = set(int(i) for i in ids_wanted)
    out: dict[int, int] = {}
    for row, (i, e) in enumerate(zip(ids.tolist(), env.tolist(), strict=True)):
        if i in wanted and (i not in out or e):
            out[int(i)] = row
    return out


def _read_steps(store, episode: int, start: int, stop: int) -> dict[str, np.ndarray]:
    """Frames, actions, values and rewards of a window. A sample store holds the world model's
    predicted ``reward_norm`` (normalised reward) instead of ``reward``; the panel shows that."""
    reward = next((f for f in ("reward", "reward_norm") if f in store.step_fields), None)
    got = store.read(episode, ["obs", "action", "value", *([reward] if reward else [])], start, stop)
    got["reward"] = got.pop(reward) if reward else np.zeros(len(got["action"]), np.float32)
    return got


def _add(rows: Rows, basis, x: np.ndarray, n_pcs: int, sample: dict, grads: dict[str, np.ndarray]) -> None:
    rows.ics.append(basis.to_ics(x).astype(np.float32))
    rows.pcs.append(basis.to_pcs(x)[:, :n_pcs].astype(np.float32))
    rows.grads.append(grads)
    rows.samples.append(sample)


def _saliency_pictures(
    rows: Rows, tag: str, store, row: int, keys: list[str], frames: np.ndarray, step: int
) -> dict:
    names = {}
    data = store.read(row, [f"grad/{k}/frame" for k in keys], 0, len(frames))
    for k in keys:
        names[k] = f"strips/{tag}_{k}.png"
        rows.strips[f"{tag}_{k}.png"] = np.ascontiguousarray(
            np.concatenate(list(overlay(frames, process(data[f"grad/{k}/frame"]), step)), axis=1)
        )
    return names


@dataclass(frozen=True)
class _Sources:
    """What an export reads: the analysis folder, its basis and stores, and the window every sample shows."""

    ws: Workspace
    basis: Basis
    source: str  # the activation the basis was fitted on
    data: EpisodeStore | None  # real episodes
    sim_store: EpisodeStore | None  # the world model's samples
    sim_sal: list[tuple]  # (name, store, settings) of each simulated-saliency store
    real_sal: tuple | None  # the same for the real-saliency store
    agent: Path | None  # replayed for hook:NAME activations
    n_pcs: int
    n_sim: int
    steps: int
    keys: list[str]  # saliency targets


def _open_sources(analysis: Path, out: Path, settings: PanelSettings) -> _Sources:
    """Check the settings and the analysis folder before any work."""
    ws = Workspace.open(analysis, create=False)
    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / "index.html").is_file())):
        raise ProclabError(
            f"--out {str(out)!r} exists and is not a panel folder; give a new or empty folder or an earlier export"
        )
    basis = ws.basis()
    source = ws.activation()
    if settings.samples < 0 or settings.real < 0 or settings.chunk < 1 or settings.background < 1:
        raise ProclabError("--samples and --real must be >= 0, --chunk and --background >= 1")
    data = EpisodeStore(ws.inputs["data"]) if ws.inputs.get("data") else None
    sim_store = EpisodeStore(ws.inputs["samples"]) if ws.inputs.get("samples") else None
    if data is None and sim_store is None:
        raise ProclabError(
            f"analysis folder {str(ws.path)!r} records neither a real store nor a sample store"
        )
    sim_sal, real_sal = _saliency_stores(ws)
    agent = ws.agent_checkpoint()
    n_sim = min(settings.samples, sim_store.num_episodes) if sim_store is not None else 0
    lengths = [int(x) for x in sim_store.episodes["length"][:n_sim]] if n_sim else []
    steps = min(lengths) if lengths else int(real_sal[2]["window"]) if real_sal else 10
    keys = sorted(
        {k for _, store, _ in [*sim_sal, *([real_sal] if real_sal else [])] for k in _grad_keys(store)}
    )
    return _Sources(
        ws,
        basis,
        source,
        data,
        sim_store,
        sim_sal,
        real_sal,
        agent,
        min(MAX_PCS, len(basis.mean)),
        n_sim,
        steps,
        keys,
    )


def _add_simulated(src: _Sources, rows: Rows, bar) -> int | None:
    """The first ``n_sim`` samples of the sample store with their saliency; returns the saliency step."""
    steps, saliency_step = src.steps, None
    task = bar.add_task("simulated samples", total=src.n_sim)
    ids = np.arange(src.n_sim)
    act = read_activation(src.sim_store, src.source, ids, checkpoint=src.agent)
    x = act.x[act.step < steps].reshape(src.n_sim, steps, -1)
    by_id = [_saliency_rows(entry, ids, "sample") for entry in src.sim_sal]
    for i in ids.tolist():
        got = _read_steps(src.sim_store, i, 0, steps)
        tag = f"sample_{i:05d}"
        rows.strips[f"{tag}_obs.png"] = _strip(got["obs"])
        strips = {"obs": f"strips/{tag}_obs.png"}
        grads = {}
        for (_, store, settings), rows_of in zip(src.sim_sal, by_id, strict=True):
            if i not in rows_of:
                continue  # a target run by several stores is taken from the first
            new = [k for k in _grad_keys(store) if k not in strips]
            saliency_step = int(settings["step"]) if saliency_step is None else saliency_step
            frames = store.read(rows_of[i], ["obs"], 0, steps)["obs"]
            strips |= _saliency_pictures(rows, tag, store, rows_of[i], new, frames, int(settings["step"]))
            fields = [f"grad/{k}/ic" for k in new if f"grad/{k}/ic" in store.step_fields]
            for f, g in store.read(rows_of[i], fields, 0, steps).items():
                grads[f.split("/")[1]] = g
        sample = {
            "name": f"sample {i}",
            "kind": "sample",
            "behaviour": None,
            "actions": got["action"].astype(int).tolist(),
            "values": rounded(got["value"]),
            "rewards": rounded(got["reward"]),
            "strips": strips,
        }
        _add(rows, src.basis, x[i], src.n_pcs, sample, grads)
        bar.advance(task)
    return saliency_step


def _real_window(src: _Sources, rows: Rows, e: int, offset: int, name: str | None = None):
    """Real episode ``e``'s window of ``src.steps`` steps from ``offset``: its strip added to ``rows`` and
    (sample, states, tag), or None when the episode is too short for it."""
    steps = src.steps
    x = read_activation(src.data, src.source, [e], checkpoint=src.agent).x[offset : offset + steps]
    if offset < 0 or len(x) < steps:
        return None
    got = _read_steps(src.data, e, offset, offset + steps)
    tag = f"real_{e:05d}_{offset}"
    rows.strips[f"{tag}_obs.png"] = _strip(got["obs"])
    sample = {
        "name": name or f"episode {e} steps {offset}-{offset + steps - 1}",
        "kind": "real",
        "behaviour": None,
        "actions": got["action"].astype(int).tolist(),
        "values": rounded(got["value"]),
        "rewards": rounded(got["reward"]),
        "strips": {"obs": f"strips/{tag}_obs.png"},
    }
    truth = truth_markers(src.data, e, offset, offset + steps)
    if truth is not None:
        sample["truth"] = truth
    return sample, x, tag


def _add_real(src: _Sources, rows: Rows, bar, count: int) -> int | None:
    """Windows of ``count`` real episodes (those with real saliency first); returns its saliency step."""
    steps, data, saliency_step = src.steps, src.data, None
    if src.real_sal is not None:
        _, rstore, rsettings = src.real_sal
        episodes = rstore.read_episode_field("episode")[:count]
        offsets = rstore.read_episode_field("offset")[:count]
        saliency_step = int(rsettings["step"])
        windows = list(zip(range(len(episodes)), episodes.tolist(), offsets.tolist(), strict=True))
    else:
        lengths_real = data.episodes["length"]
        windows = [(None, e, 0) for e in range(data.num_episodes) if lengths_real[e] >= steps][:count]
    task = bar.add_task("real episodes", total=len(windows))
    for row, e, offset in windows:
        window = _real_window(src, rows, e, offset)
        if window is None:
            continue
        sample, x, tag = window
        if row is not None:
            frames = rstore.read(row, ["obs"], 0, steps)["obs"]
            sample["strips"] |= _saliency_pictures(
                rows, tag, rstore, row, _grad_keys(rstore), frames, int(rsettings["step"])
            )
        _add(rows, src.basis, x, src.n_pcs, sample, {})
        bar.advance(task)
    return saliency_step


def _add_moments(src: _Sources, rows: Rows, bar, moments: list[tuple[int, int, str]]) -> dict:
    """A window around each atlas moment (episode, step, what it is) that no window holds yet; returns
    (episode, step) -> (panel sample, step inside its window) for every moment that has one."""
    steps, lengths = src.steps, src.data.episodes["length"]
    task = bar.add_task("atlas moments", total=len(moments))
    windows: dict[tuple[int, int], int] = {}
    links = {}
    for e, t, what in moments:
        offset = int(min(max(t - steps // 2, 0), lengths[e] - steps))
        if (e, offset) not in windows:
            window = _real_window(
                src, rows, e, offset, f"episode {e} steps {offset}-{offset + steps - 1} ({what})"
            )
            if window is not None:
                windows[e, offset] = len(rows.samples)
                _add(rows, src.basis, window[1], src.n_pcs, window[0], {})
        if (e, offset) in windows:
            links[e, t] = (windows[e, offset], t - offset)
        bar.advance(task)
    return links


def _atlases(src: _Sources, rows: Rows, bar, per_card: int) -> tuple[list[dict], dict[str, Path]]:
    """The folder's atlases as the front page (:mod:`proclab.panel.atlas_export`), their moments added as
    real windows the cards link to."""
    found, files = [], {}
    for atlas in find_atlases(src.ws):
        moments = linked_moments(atlas, per_card) if src.data is not None else []
        section, images = atlas_section(atlas, _add_moments(src, rows, bar, moments))
        found.append(section)
        files |= images
    return found, files


def _interventions(ws) -> tuple[list[dict], dict[str, Path]]:
    """Each ``intervene*`` command's summary and first video (copied into the panel)."""
    found, files = [], {}
    for summary in sorted(ws.path.glob("intervene*/summary.json")):
        video = next(iter(sorted(summary.parent.glob("**/*.mp4"))), None)
        name = summary.parent.name
        if video is not None:
            files[f"videos/{name}.mp4"] = video
        found.append(
            {
                "name": name,
                "summary": read_json(summary, "intervention summary"),
                "video": f"videos/{name}.mp4" if video is not None else None,
            }
        )
    return found, files


def export(
    analysis: Path, out: Path, settings: PanelSettings = PanelSettings(), progress: bool = True
) -> Path:
    """The analysis folder ``analysis`` as a panel folder ``out`` (its data/ replaced); returns ``out``'s path."""
    src = _open_sources(analysis, out, settings)
    ws, basis, steps = src.ws, src.basis, src.steps
    rows = Rows([], [], [], [], {})
    saliency_step = None
    with progress_bar(transient=True, disable=not progress) as bar:
        if src.n_sim:
            saliency_step = _add_simulated(src, rows, bar)
        if src.data is not None and settings.real:
            real_step = _add_real(src, rows, bar, settings.real)
            saliency_step = saliency_step if saliency_step is not None else real_step
        atlases, atlas_files = _atlases(src, rows, bar, settings.atlas_moments)
    if not rows.samples:
        raise ProclabError(
            f"nothing to export from {str(ws.path)!r}: no sample or real episode with {steps} steps"
        )
    ics = np.stack(rows.ics)
    arrays = {"ics": ics, "pcs": np.stack(rows.pcs)}
    for k in src.keys:
        if any(k in g for g in rows.grads):
            nan = np.full((steps, basis.n_ics), np.nan, np.float32)
            arrays[f"grad:{k}"] = np.stack([g.get(k, nan) for g in rows.grads])
    behaviours = _behaviours(ws, rows.samples, src.n_sim)
    interventions, files = _interventions(ws)
    files |= atlas_files
    doc = {
        "meta": {
            "title": settings.title or f"proclab panel: {ws.path.resolve().name}",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "source": str(ws.path.resolve()),
            "n_ics": basis.n_ics,
            "n_pcs": src.n_pcs,
            "steps": steps,
            "saliency_step": saliency_step if saliency_step is not None else steps // 2,
            "frame_size": int(rows.strips[next(iter(rows.strips))].shape[0]),
            "actions": _action_names(),
            "targets": src.keys,
            "inputs": ws.inputs,
        },
        "background": _background(
            src.data if src.data is not None else src.sim_store,
            basis,
            src.source,
            src.n_pcs,
            settings,
            src.agent,
        ),
        "samples": rows.samples,
        "behaviours": behaviours,
        "extrema": {
            "fraction": 0.01,
            "any_step": extrema(ics),
            "saliency_step": extrema(ics, [min(saliency_step or steps // 2, steps - 1)]),
        },
        "histograms": histograms(ics),
        **_agent_context(ws, data=src.data, settings=settings),
        "interventions": interventions,
        "atlases": atlases,
    }
    return write_panel(out, PanelData(doc, arrays, rows.strips, files), chunk=settings.chunk)


def _action_names() -> list[str]:
    return list(ACTION_NAMES)


def _behaviours(ws, samples: list[dict], n_sim: int) -> list[dict]:
    """Behaviours of the exported simulated samples (``analyze behaviours``), members as panel indices."""
    path = ws.path / "behaviours" / "labels.npz"
    if not path.is_file():
        return []
    f = load_npz(path, "behaviour labels")
    if not {"ids", "labels"} <= set(f):
        raise ProclabError(f"behaviour labels {str(path)!r} are corrupt (no ids or labels)")
    ids, labels = f["ids"], f["labels"]
    by_id = {int(i): int(b) for i, b in zip(ids, labels, strict=True)}
    members: dict[int, list[int]] = {}
    for i in range(n_sim):
        if i in by_id:
            samples[i]["behaviour"] = by_id[i]
            members.setdefault(by_id[i], []).append(i)
    return [{"id": b, "name": f"behaviour {b}", "members": m} for b, m in sorted(members.items())]


def _background(store, basis, source: str, n_pcs: int, settings: PanelSettings, agent: Path | None) -> dict:
    """A seeded random subset of the real states, in IC and PC coordinates."""
    lengths = store.episodes["length"]
    upto = (
        int(np.searchsorted(np.cumsum(lengths), settings.background * 4)) + 1
    )  # enough episodes to draw from
    x = read_activation(store, source, np.arange(min(upto, store.num_episodes)), checkpoint=agent).x
    pick = np.sort(np.random.default_rng(settings.seed).permutation(len(x))[: settings.background])
    return {"ics": rounded(basis.to_ics(x[pick])), "pcs": rounded(basis.to_pcs(x[pick])[:, :n_pcs])}


def _run_dir(checkpoint: Path) -> Path | None:
    for d in (checkpoint, *checkpoint.parents):
        if (d / "metrics.csv").is_file():
            return d
    return None


def _agent_context(ws, data, settings: PanelSettings) -> dict:
    """The agent's learning curve and eval rows, when its training run can be found."""
    checkpoint = ws.agent_checkpoint(store=data if data is not None and data.recordings() else None)
    run = _run_dir(checkpoint) if checkpoint else None
    training = None
    if run is not None:
        m = read_metrics(run)
        metric = "charts/episodic_return"
        if metric in m:
            pairs = [(s, v) for s, v in zip(m["step"], m[metric], strict=True) if np.isfinite(v)]
            if pairs:
                training = {
                    "metric": metric,
                    "steps": [p[0] for p in pairs],
                    "values": rounded([p[1] for p in pairs]),
                }
    files = list(settings.eval) or (sorted(run.glob("eval*.json")) if run is not None else [])
    rows = []
    for f in files:
        table = read_json(f, "eval results")
        if not isinstance(table, dict):
            raise ProclabError(f"eval results {str(f)!r} are not a proclab eval JSON file")
        for r in table.get("rows", []):
            rows.append({k: r.get(k) for k in EVAL_COLUMNS})
    return {"training": training, "eval": rows}
