"""``proclab analyze intervene`` and ``analyze intervene-sim``: what editing one hidden-state direction does,
in the real env and in simulation; and ``analyze edit``, one declarative edit at any hook point
(:mod:`.at_hook`), played beside the plain agent as ``analyze intervene`` plays its arms.

The intervention (:mod:`proclab.interpret.interventions.direction_edits`) is applied in the folder's basis to
the state tensor the basis was fitted on. Two arms, baseline and intervened, are compared
*paired* (:mod:`proclab.interpret.stats.paired`):

* ``analyze intervene``: both agents play the same levels: one vector env per arm, built with the
  same seed, split and slot count, each slot recording the same fixed quota of complete
  episodes (the level sequence of a Procgen slot does not depend on the actions, so slot ``s``'s
  ``k``-th episode is the same level in both arms; the multisets of level seeds are asserted
  equal). Sampled actions also share their random stream. Both arms are ordinary episode
  stores (``intervene/real/baseline.zarr``, ``intervene/real/intervened.zarr``), compared per level:
  action frequencies and their total-variation distance, return, level completion, episode length.
* ``analyze intervene-sim``: the first ``--n`` bottleneck vectors of the sample store, simulated with
  each agent under the samples' own settings (two sample stores in ``wm sample``'s format,
  ``intervene-sim/sim/``): action frequencies, predicted return, done rate and, when ``analyze
  behaviours`` has saved its transform, behaviour frequencies through its ``assign``.

Outputs of each: the stores, side-by-side videos (baseline | intervened) of the first pairs, bar plots
of the frequencies with the CIs of their changes, and ``summary.json`` with every number.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated, ClassVar

import numpy as np
import torch
import tyro

from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs.actions import ACTION_NAMES
from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.bases.activations import read_activation
from proclab.interpret.bases.coordinates import LinearCoordinates
from proclab.interpret.bases.pca_ica import KINDS
from proclab.interpret.behaviours.grouping import NAME as BEHAVIOURS
from proclab.interpret.behaviours.grouping import BehaviourModel, SampleSet, source_of
from proclab.interpret.interventions.arms import Recorded, off_data_warning
from proclab.interpret.interventions.at_hook import NAME as EDIT
from proclab.interpret.interventions.at_hook import hook_edit
from proclab.interpret.interventions.direction_edits import OPS, DirectionEdit, Hold
from proclab.interpret.interventions.edit_target import agent_checkpoint, recorded, state_key
from proclab.interpret.saliency.world_model import open_samples
from proclab.interpret.stats.paired import frequency_changes, mean_change
from proclab.interpret.workspace.command import AGENT, DATA, SAMPLES, WM, AnalysisArgs
from proclab.interpret.workspace.figures import save_tight
from proclab.interpret.workspace.folder import Workspace
from proclab.io.arguments import LevelRuleFlag
from proclab.io.configs import from_dict
from proclab.io.files import subplots
from proclab.io.progress import phases
from proclab.io.run_dirs import write_json_atomic
from proclab.io.video import write_video
from proclab.models.edited import Intervened
from proclab.models.loading import freeze, load_agent
from proclab.record import RecordSettings
from proclab.record.recorder import EpisodeRecorder
from proclab.record.recording import FINAL_OBS_NOTE, prepare_recording
from proclab.stats.bootstrap import resamples
from proclab.store import EpisodeStore, ShardWriter
from proclab.store.schema import STATE_LAYOUT_ATTR
from proclab.store.state_codec import StateCodec
from proclab.worldmodel.checkpoint import load_world_model
from proclab.worldmodel.sample import rollouts
from proclab.worldmodel.simulate import dreamed

NAME = "intervene"
SIM_NAME = "intervene-sim"
ARMS = ("baseline", "intervened")


@dataclass(frozen=True)
class PlayArgs(AnalysisArgs, LevelRuleFlag):
    """Options of the commands that play an edited agent beside the plain one on the same real levels (edit,
    intervene, sweep)."""

    agent: AGENT = None
    """Agent played: a proclab run or checkpoint directory (default: the folder's, else the one that recorded
    its data)."""
    split: str = "held-out"
    """Levels played: held-out (levels the agent never trained on), a named split or START:NUM."""
    greedy: bool = True
    """Take the most likely action (--no-greedy samples, with the same random numbers in every arm)."""
    bootstrap: int = 2000
    """Bootstrap resamples of the paired CIs."""


@dataclass(frozen=True)
class ArmArgs(PlayArgs):
    """Options of the commands that record each arm's complete episodes into an episode store (edit,
    intervene)."""

    episodes: int = 200
    """Complete episodes per arm."""
    num_envs: int = 16
    """Parallel env slots per arm (each plays a fixed quota of episodes)."""


@dataclass(frozen=True)
class BasisArgs(AnalysisArgs):
    """Options of the commands that edit the agent's state in the folder's basis (intervene, intervene-sim,
    sweep)."""

    basis: str = "ica"
    """Coordinates the edits act on: ica (the folder's ICs) or pca (its first k PCs)."""
    state: str | None = None
    """State tensor edited (core.0.h, an LSTM's core.0.c, ...); default and only choice: the one the folder's
    basis was fitted on."""


@dataclass(frozen=True)
class DirectionArgs(BasisArgs):
    """The edit of a basis direction that intervene and intervene-sim make: exactly one of these."""

    move: Annotated[str | None, tyro.conf.arg(metavar="I:J")] = None
    """Move coordinate I of every state increment onto direction J (c'_J += c_I, c'_I = 0)."""
    collapse: Annotated[str | None, tyro.conf.arg(metavar="I")] = None
    """Set coordinate I of every state increment to zero (the state's coordinate stays at its start value)."""
    exchange: Annotated[str | None, tyro.conf.arg(metavar="I:J")] = None
    """Swap coordinates I and J of every state increment."""
    hold: Annotated[str | None, tyro.conf.arg(metavar="I:ARM")] = None
    """Hold coordinate I of the state at every step at its recorded mean, 5th or 95th percentile
    (I:mean, I:p05, I:p95)."""


@dataclass(frozen=True)
class InterveneArgs(DirectionArgs, ArmArgs):
    """Intervene: move, collapse, exchange or hold a basis direction while the agent plays the real game.

    The edited and the plain agent play the same levels, compared paired by level. Outputs in
    ANALYSIS/intervene/. The same edits in the world model: analyze intervene-sim; every arm on every
    direction: analyze sweep; an edit at any hook point: analyze edit."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"episodes": 20, "videos": 2}}

    seed: int = 0
    """Seed of the envs (the levels each slot plays), sampled actions (--no-greedy) and the bootstrap."""
    videos: int = 4
    """Side-by-side videos (baseline | intervened) of the first K levels."""


@dataclass(frozen=True)
class InterveneSimArgs(DirectionArgs):
    """Intervene in simulation: the edits of analyze intervene, played in the world model, paired by sample.

    The world model simulates its own agent, edited and plain, from the sample store's first --n bottleneck
    vectors under the samples' settings. Outputs in ANALYSIS/intervene-sim/."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"n": 50, "videos": 2}}

    seed: int = 0
    """Seed of the simulations' random draws (the same stream in both arms) and the bootstrap."""
    samples: SAMPLES = None
    """Sample store whose bottleneck vectors are re-simulated (default: the folder's)."""
    wm: WM = None
    """World model: a world-model run or checkpoint directory (default: the one the samples were simulated
    with)."""
    n: int = 200
    """Bottleneck vectors (the first N samples)."""
    batch_size: int = 64
    """Rollouts simulated at once."""
    bootstrap: int = 2000
    """Bootstrap resamples of the paired CIs."""
    videos: int = 4
    """Side-by-side videos (baseline | intervened) of the first K samples."""


EDIT_FLAGS = (*OPS, "hold")


def intervention_of(args: DirectionArgs) -> DirectionEdit | Hold:
    given = [(op, getattr(args, op)) for op in EDIT_FLAGS if getattr(args, op) is not None]
    if len(given) != 1:
        raise ProclabError(
            "give exactly one intervention (--move I:J, --collapse I, --exchange I:J or --hold I:ARM); "
            f"got {len(given)}"
        )
    op, text = given[0]
    return Hold.parse(text) if op == "hold" else DirectionEdit.parse(op, text)


def run_intervene(args: InterveneArgs) -> Path:
    """``analyze intervene``: both arms play the real game."""
    return _run(args, NAME, "real", _real, ("episodes", "num_envs", "bootstrap"))


def run_intervene_sim(args: InterveneSimArgs) -> Path:
    """``analyze intervene-sim``: both arms simulated by the world model."""
    return _run(args, SIM_NAME, "sim", _simulated, ("n", "bootstrap", "batch_size"))


def _run(args: DirectionArgs, name: str, where: str, part, counts: tuple[str, ...]) -> Path:
    """One intervention into ``ANALYSIS/name``: ``part`` (:func:`_real` or :func:`_simulated`) plays both arms
    and gives the summary's ``where`` entry; the ``counts`` fields must be >= 1."""
    start = time.time()
    if args.basis not in KINDS:
        raise unknown_choice("--basis", args.basis, KINDS)
    args.require_positive(*counts)
    intervention = intervention_of(args)
    ws = Workspace.open(args.out, create=False)
    basis = ws.basis()
    out = ws.command_dir(name)
    rt = args.runtime()
    summary: dict = {
        "intervention": intervention.spec,
        "basis": args.basis,
        "basis_file": str(ws.basis_path),
        "activation": ws.inputs.get("activation"),
    }
    with phases(2, name) as ph:
        summary[where], outputs = part(args, ws, basis, intervention, rt, out, ph)
    summary["seconds"] = round(time.time() - start, 3)
    write_json_atomic(out / "summary.json", summary)
    ws.record_command(name, asdict(args), [str(out / "summary.json"), *outputs], time.time() - start)
    return ws.final(out)


# -- real environment ----------------------------------------------------------------------------
def record_arm(agent, checkpoint: Path, path: Path, args: ArmArgs, rt, attrs: dict, tick=None) -> Path:
    """One arm: ``args.episodes`` complete episodes of ``agent`` on the fixed env seed ``args.seed``."""
    if path.exists():
        shutil.rmtree(path)  # a re-run replaces its arm: two recordings in one store would mix levels
    recording, ckpt = prepare_recording(
        checkpoint,
        path,
        RecordSettings(
            episodes=args.episodes,
            split=args.split,
            level_rule=args.level_rule,
            num_envs=args.num_envs,
            seed=args.seed,
            ground_truth=False,  # an arm's recorder stores what the agent saw and did (not the game's state)
        ),
    )
    env_config = from_dict(EnvConfig, ckpt.meta["env"])
    n_envs = max(len(env_config.games()), min(args.num_envs, args.episodes))
    rule = recording.settings.level_rule or ""  # resolved by prepare_recording: the agent's own by default
    env = ProcgenVecEnv(
        replace(env_config, num_envs=n_envs, level_rule=rule), seed=args.seed, split=recording.settings.split
    )  # the split resolved by prepare_recording ("held-out": the levels after the agent's training levels)
    torch.manual_seed(args.seed)  # sampled actions: the same random stream in both arms
    norm = recording.reward_norm
    writer = ShardWriter(
        path,
        attrs={
            "recording": recording.attrs(),
            STATE_LAYOUT_ATTR: recording.state_layout,
            "final_obs": FINAL_OBS_NOTE,
            **attrs,
        },
        background=True,
    )
    recorder = EpisodeRecorder(
        env,
        agent,
        rt,
        reward_scale=norm.scale,
        reward_clip=norm.clip,
        split=recording.split,
        greedy=args.greedy,
    )
    try:
        recorder.run(args.episodes, lambda steps, episode: writer.append(steps, episode), tick=tick)
    finally:
        env.close()
        writer.close()
    return path


@dataclass(frozen=True)
class ArmEpisodes:
    """Per-episode facts of one arm's store."""

    level: np.ndarray
    ret: np.ndarray
    complete: np.ndarray
    length: np.ndarray
    actions: np.ndarray  # (episodes, A) counts

    @classmethod
    def read(cls, path: Path, num_actions: int) -> ArmEpisodes:
        store = EpisodeStore(path)
        ids = np.arange(store.num_episodes)
        e = store.episodes
        acts = store.read_steps("action", ids)
        owner = np.repeat(ids, e["length"])
        counts = np.zeros((len(ids), num_actions), np.int64)
        np.add.at(counts, (owner, acts), 1)
        return cls(
            np.asarray(e["level_seed"]),
            np.asarray(e["return"], np.float64),
            np.asarray(e["level_complete"], np.float64),
            np.asarray(e["length"], np.float64),
            counts,
        )

    def per_level(self, levels: np.ndarray) -> dict[str, np.ndarray]:
        """Means (counts: sums) over each level's episodes, in the order of ``levels``."""
        rows = [np.flatnonzero(self.level == lv) for lv in levels]
        return {
            "return": np.array([self.ret[r].mean() for r in rows]),
            "level_complete": np.array([self.complete[r].mean() for r in rows]),
            "length": np.array([self.length[r].mean() for r in rows]),
            "actions": np.stack([self.actions[r].sum(0) for r in rows]),
        }


def compare_real(base: ArmEpisodes, inter: ArmEpisodes, reps: int, seed: int) -> dict:
    """Paired by level; the arms must have played the same multiset of levels."""
    if Counter(base.level.tolist()) != Counter(inter.level.tolist()):
        raise RuntimeError("the baseline and intervened arms played different levels; the pairing is broken")
    levels = np.unique(base.level)
    b, i = base.per_level(levels), inter.per_level(levels)
    idx = resamples(len(levels), reps, seed)
    out = {k: mean_change(b[k], i[k], idx) for k in ("return", "level_complete", "length")}
    out["actions"] = frequency_changes(b["actions"], i["actions"], idx, ACTION_NAMES[: b["actions"].shape[1]])
    out |= {"episodes": len(base.level), "levels": len(levels)}
    return out


def _arms(
    agent, basis, edit: DirectionEdit | Hold, key: str, args: DirectionArgs, rec: Recorded
) -> dict[str, tuple]:
    """Per arm, its agent (the intervened one edits state ``key``) and the ``intervention`` record its
    store carries."""
    coords = LinearCoordinates(basis, args.basis)
    if isinstance(edit, Hold):
        value = rec.held(edit.arm, edit.i, 1, np.random.default_rng(args.seed))[0]
        intervened = Intervened(agent, [edit.intervention(coords, key, value)])
    else:
        intervened = Intervened(agent, [edit.intervention(coords, key)])
    return {
        arm: (a, {"arm": arm, "spec": edit.spec, "basis": args.basis, "state": key})
        for arm, a in zip(ARMS, (agent, intervened), strict=True)
    }


def placements(
    ws: Workspace, coords: LinearCoordinates, rec: Recorded, edit, store: Path, rt
) -> dict[str, dict]:
    """Where the edited coordinates of the intervened arm's states lie in the recorded distribution
    (per coordinate the edit changes, over every stored step; a hook point replayed on ``rt``)."""
    x = read_activation(EpisodeStore(store), ws.inputs["activation"], runtime=rt).x
    c = coords.encode(x.astype(np.float64))
    label = {"ica": "IC", "pca": "PC"}[coords.kind]
    return {f"{label} {m}": rec.placement(m, c[:, m]) for m in edit.coordinates}


def _placed(ws, basis, rec: Recorded, edit, args, store: Path, rt) -> dict[str, dict]:
    """:func:`placements` of the intervened store, with the one-line warning printed when one leaves
    the data."""
    placed = placements(ws, LinearCoordinates(basis, args.basis), rec, edit, store, rt)
    warning = off_data_warning(placed)
    if warning:
        print(warning, file=sys.stderr)
    return placed


def _real(args, ws, basis, intervention, rt, out: Path, ph) -> tuple[dict, list[str]]:
    checkpoint = agent_checkpoint(ws, args.agent, "analyze intervene")
    ws.require_inputs(checkpoint=checkpoint)
    agent, _, _ = load_agent(checkpoint, rt)
    key = state_key(ws, agent, args.state)
    rec = recorded(ws, LinearCoordinates(basis, args.basis), agent, key)
    paths = {}
    for arm, (a, tag) in _arms(agent, basis, intervention, key, args, rec).items():
        with ph.phase(f"real env: {arm} ({args.episodes} episodes)"):
            attrs = {"intervention": tag}
            paths[arm] = record_arm(a, checkpoint, out / "real" / f"{arm}.zarr", args, rt, attrs)
    num_actions = agent.config.num_actions
    base, inter = (ArmEpisodes.read(paths[a], num_actions) for a in ARMS)
    result = compare_real(base, inter, args.bootstrap, args.seed)
    result |= {
        "edit": _placed(ws, basis, rec, intervention, args, paths["intervened"], rt),
        "split": args.split,
        "greedy": args.greedy,
        "state": key,
        "checkpoint": str(checkpoint),
        "stores": {a: str(ws.final(p)) for a, p in paths.items()},
    }
    files = [str(p) for p in paths.values()]
    files.append(
        str(frequency_bars(result["actions"], out / "real_actions.png", f"real env: {intervention.spec}"))
    )
    files += _real_videos(paths, base, args.videos, out / "videos")
    return result, files


def _real_videos(paths: dict[str, Path], base: ArmEpisodes, k: int, folder: Path) -> list[str]:
    """The first ``k`` levels: each arm's first episode on it, side by side."""
    stores = {a: EpisodeStore(p) for a, p in paths.items()}
    files = []
    for level in list(dict.fromkeys(base.level.tolist()))[:k]:
        eps = {
            a: stores[a].read(
                int(np.flatnonzero(stores[a].episodes["level_seed"] == level)[0]), ["obs", "action"]
            )
            for a in ARMS
        }
        files.append(str(side_by_side(folder / f"real_level_{level}.mp4", eps)))
    return files


# -- simulation -----------------------------------------------------------------------------------
def simulate_arm(
    wm,
    agent,
    bottlenecks: torch.Tensor,
    settings,
    batch: int,
    seed: int,
    path: Path,
    attrs: dict,
    reward_field: str,
) -> Path:
    """Simulate ``bottlenecks`` under ``settings`` (a sample store's) with ``agent`` into a sample store."""
    if path.exists():
        shutil.rmtree(path)
    codec = StateCodec(agent.state_shapes())
    layout = {k: [[key, list(s)] for key, s in v] for k, v in codec.layout.items()}
    torch.manual_seed(seed)  # sampled latents or actions: the same random stream in both arms
    with ShardWriter(path, attrs={STATE_LAYOUT_ATTR: layout, **attrs}) as writer, torch.no_grad():
        for lo in range(0, len(bottlenecks), batch):
            traj = dreamed(
                wm,
                agent,
                bottlenecks[lo : lo + batch],
                settings.steps + 1,
                modal=settings.modal,
                greedy=settings.greedy,
            )
            for k, (steps, info) in enumerate(rollouts(traj, settings.steps, reward_field, codec), start=lo):
                writer.append(steps, {"init": "resimulated", "source_sample": k, **info})
    return path


def compare_sim(
    paths: dict[str, Path],
    reps: int,
    seed: int,
    num_actions: int,
    behaviours=None,
    source: str | None = None,
    runtime=None,
) -> dict:
    """Paired by bottleneck vector: action frequencies, predicted return, done rate, behaviours (a hook
    ``source`` replayed on ``runtime``)."""
    stores = {a: EpisodeStore(p) for a, p in paths.items()}
    n = stores["baseline"].num_episodes
    ids = np.arange(n)
    idx = resamples(n, reps, seed)
    counts, ret, done = {}, {}, {}
    for a, s in stores.items():
        acts = s.read_steps("action", ids).reshape(n, -1)
        counts[a] = np.stack([np.bincount(r, minlength=num_actions) for r in acts])
        ret[a] = np.asarray(s.episodes["return"], np.float64)
        done[a] = s.read_steps("terminated", ids).reshape(n, -1).any(1).astype(np.float64)
    out = {
        "samples": n,
        "actions": frequency_changes(
            counts["baseline"], counts["intervened"], idx, ACTION_NAMES[:num_actions]
        ),
        "predicted_return": mean_change(ret["baseline"], ret["intervened"], idx),
        "done_rate": mean_change(done["baseline"], done["intervened"], idx),
    }
    if behaviours is not None:
        k = behaviours.config.clusters
        labels = {}
        for a, s in stores.items():
            sample_set = SampleSet.read(s, ids.tolist(), source, runtime=runtime)
            labels[a] = behaviours.assign(sample_set.state, sample_set.env_h)[0]
        one_hot = {a: np.eye(k, dtype=np.int64)[lab] for a, lab in labels.items()}
        out["behaviours"] = frequency_changes(
            one_hot["baseline"], one_hot["intervened"], idx, [str(c) for c in range(k)]
        )
        out["behaviour_labels"] = {a: lab.tolist() for a, lab in labels.items()}
    return out


def _simulated(args, ws, basis, intervention, rt, out: Path, ph) -> tuple[dict, list[str]]:
    store, settings, wm_path = open_samples(
        ws,
        args.samples,
        args.wm,
        "analyze intervene-sim needs bottleneck vectors: pass --samples SAMPLES (proclab wm sample)",
    )
    wm, agent, ckpt = load_world_model(wm_path, rt)
    freeze(wm)
    key = state_key(ws, agent, args.state)
    rec = recorded(ws, LinearCoordinates(basis, args.basis), agent, key)
    n = min(args.n, store.num_episodes)
    bottlenecks = torch.from_numpy(np.stack([store.info(i)["bottleneck"] for i in range(n)])).float()
    paths = {}
    for arm, (a, tag) in _arms(agent, basis, intervention, key, args, rec).items():
        with ph.phase(f"simulation: {arm} ({n} samples)"):
            attrs = {"simulation": _simulation_record(settings, store.path, args.seed), "intervention": tag}
            paths[arm] = simulate_arm(
                wm,
                a,
                bottlenecks.to(rt.device),
                settings,
                args.batch_size,
                args.seed,
                out / "sim" / f"{arm}.zarr",
                attrs,
                ckpt.meta["reward_field"],
            )
    behaviours, note = _behaviour_model(ws, settings.steps)
    result = compare_sim(
        paths,
        args.bootstrap,
        args.seed,
        agent.config.num_actions,
        behaviours,
        source_of(ws, EpisodeStore(paths["baseline"])),
        rt,
    )
    result |= {
        "edit": _placed(ws, basis, rec, intervention, args, paths["intervened"], rt),
        "steps": settings.steps,
        "modal": settings.modal,
        "greedy": settings.greedy,
        "state": key,
        "world_model": str(ckpt.path),
        "stores": {a: str(ws.final(p)) for a, p in paths.items()},
    }
    if note:
        result["behaviours_note"] = note
    return result, [str(p) for p in paths.values()] + _sim_pictures(
        result, paths, n, intervention.spec, args, out
    )


def _simulation_record(settings, samples: Path, seed: int) -> dict:
    """An arm's ``simulation`` attribute: the samples' settings, as ``wm sample`` records them, and
    where its bottleneck vectors came from."""
    return {
        **asdict(settings),
        "init": "resimulated",
        "seed": seed,
        "samples": str(Path(samples).resolve()),
        "created": time.time(),
    }


def _behaviour_model(ws: Workspace, steps: int):
    """The folder's behaviour transform (``analyze behaviours``), or None and a note saying why not: it
    was never fitted, or samples of ``steps`` steps are too short for its lags."""
    transform = ws.path / BEHAVIOURS / "transform.npz"
    if not transform.is_file():
        return None, "no behaviours: run `proclab analyze behaviours` on this folder first"
    behaviours = BehaviourModel.load(transform)
    lags = max(behaviours.config.lags)
    if steps > lags:
        return behaviours, None
    return None, f"samples of {steps} steps are too short for lags {lags}"


def _sim_pictures(result: dict, paths: dict[str, Path], n: int, spec: str, args, out: Path) -> list[str]:
    """Bar plots of the action (and behaviour) frequency changes, and the first ``--videos`` pairs."""
    files = [str(frequency_bars(result["actions"], out / "sim_actions.png", f"simulation: {spec}"))]
    if "behaviours" in result:
        files.append(
            str(
                frequency_bars(
                    result["behaviours"], out / "sim_behaviours.png", f"behaviours in simulation: {spec}"
                )
            )
        )
    stores = {a: EpisodeStore(p) for a, p in paths.items()}
    for i in range(min(args.videos, n)):
        eps = {a: stores[a].read(i, ["obs", "action"]) for a in ARMS}
        files.append(str(side_by_side(out / "videos" / f"sim_sample_{i:05d}.mp4", eps, fps=4)))
    return files


# -- pictures ------------------------------------------------------------------------------------
def side_by_side(path: Path, eps: dict[str, dict], fps: float = 15) -> Path:
    """Baseline | intervened, frame by frame; the shorter episode holds its last frame."""
    frames = {a: eps[a]["obs"] for a in ARMS}
    T = max(len(f) for f in frames.values())
    padded = [np.concatenate([f, np.repeat(f[-1:], T - len(f), 0)]) for f in frames.values()]
    gap = np.full((T, 3, 64, 2), 255, np.uint8)
    joined = np.concatenate([padded[0], gap, padded[1]], -1)

    def name(a: str, t: int) -> str:
        acts = eps[a]["action"]
        return ACTION_NAMES[int(acts[t])] if t < len(acts) else "(ended)"

    captions = [[f"base {name('baseline', t)}", f"int  {name('intervened', t)}"] for t in range(T)]
    return write_video(path, joined, fps=fps, scale=4, captions=captions)


def frequency_bars(changes: dict, path: Path, title: str) -> Path:
    """Frequencies per category in both arms, and the change with its 95 % CI (significant in red)."""
    per = changes["per_category"]
    names = list(per)
    x = np.arange(len(names))
    fig, (top, bottom) = subplots(2, 1, figsize=(max(6, 0.45 * len(names)), 6), sharex=True)
    top.bar(x - 0.2, [per[k]["baseline"] for k in names], 0.4, label="baseline")
    top.bar(x + 0.2, [per[k]["intervened"] for k in names], 0.4, label="intervened")
    top.set_ylabel("frequency")
    top.legend()
    tv = changes["tv_distance"]
    top.set_title(f"{title}  (TV {tv['value']:.3f}, CI {tv['ci95'][0]:.3f}..{tv['ci95'][1]:.3f})")
    change = np.array([per[k]["change"] for k in names])
    ci = np.array([per[k]["ci95"] for k in names])
    colours = ["tab:red" if per[k]["significant"] else "tab:grey" for k in names]
    bottom.bar(x, change, 0.6, color=colours, yerr=np.abs(np.stack([change - ci[:, 0], ci[:, 1] - change])))
    bottom.axhline(0, color="black", lw=0.8)
    bottom.set_ylabel("change (95% CI)")
    bottom.set_xticks(x, names, rotation=60, ha="right", fontsize=7)
    return save_tight(fig, path)


# -- analyze edit -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class HookEditArgs(ArmArgs):
    """Edit: one declarative edit at any hook point while the agent plays the real game, paired by level.

    The edit applies on every forward pass (feed-forward agents too); the edited and the plain agent play the
    same levels. Outputs in ANALYSIS/intervene-edit/. Edits of the folder's basis directions: analyze
    intervene."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"episodes": 20}}

    seed: int = 0
    """Seed of the envs (the levels each slot plays), sampled actions (--no-greedy), the episodes replayed for
    a mean/resample distribution and the bootstrap."""
    hook: str = tyro.MISSING
    """Hook point edited (any of the agent's: torso.block1.hook_out, torso.hook_fc, core.0.hook_h, ...)."""
    edit: Annotated[str, tyro.conf.arg(metavar="SPEC")] = tyro.MISSING
    """SELECTION KIND [VALUE]; SELECTION is all, 'channel C', 'site C@Y,X' or 'units I,J'; KIND set/add/scale
    VALUE, or mean/resample (the hook's recorded distribution, from --data), e.g. 'channel 7 set 0'."""
    data: DATA = None
    """With a mean/resample edit: the episode store replayed for the hook's distribution (default: the
    folder's)."""
    source_steps: int = 20_000
    """At most about this many recorded steps make the mean/resample distribution."""


def run_edit(args: HookEditArgs) -> Path:
    """Baseline and edited agent on the same levels; paired changes of return, completion, length, actions."""

    start = time.time()
    args.require_positive("episodes", "num_envs", "bootstrap", "source_steps")
    ws = Workspace.open(args.out)
    rt = args.runtime()
    checkpoint = agent_checkpoint(ws, args.agent, "analyze edit")
    data = args.data or (Path(ws.inputs["data"]) if ws.inputs.get("data") else None)
    ws.require_inputs(checkpoint=checkpoint)
    agent, _, _ = load_agent(checkpoint, rt)
    edit = hook_edit(
        args.hook, args.edit, agent, checkpoint, data, rt, steps=args.source_steps, seed=args.seed
    )
    out = ws.command_dir(EDIT)
    paths = {}
    with phases(2, EDIT) as ph:
        for arm, a in zip(ARMS, (agent, Intervened(agent, [edit])), strict=True):
            with ph.phase(f"real env: {arm} ({args.episodes} episodes)"):
                tag = {"arm": arm, "spec": edit.describe()}
                paths[arm] = record_arm(
                    a, checkpoint, out / "real" / f"{arm}.zarr", args, rt, {"intervention": tag}
                )
    base, inter = (ArmEpisodes.read(paths[a], agent.config.num_actions) for a in ARMS)
    summary = {
        "intervention": edit.describe(),
        "hook": args.hook,
        "real": compare_real(base, inter, args.bootstrap, args.seed)
        | {"split": args.split, "greedy": args.greedy, "checkpoint": str(checkpoint)},
        "seconds": round(time.time() - start, 3),
    }
    write_json_atomic(out / "summary.json", summary)
    ws.record_command(
        EDIT, asdict(args), [str(out / "summary.json"), *map(str, paths.values())], time.time() - start
    )
    return ws.final(out)
