"""``proclab analyze probe``: what an activation knows about the game, against three controls.

For each ``--target`` (a ground-truth feature or event of the store, e.g. ``goal_x`` or
``cheese_dx``; :mod:`proclab.interpret.probes.targets`) a linear probe is cross-validated over
episodes (:mod:`proclab.interpret.probes.linear`) from the activation at ``--hook`` of the agent
replayed on the store, and reported beside:

* ``random_agent``: the same probe on the same hook of a randomly initialised agent of the same
  architecture (its checkpoint is saved in the output folder): how much a probe reads from the
  input through random features alone;
* ``shuffled_labels``: the same probe on labels whose episodes were permuted (the control task of
  Hewitt & Liang 2019; the probe's margin over it is its *selectivity*);
* ``constant``: the training folds' mean (or majority class), the score of knowing nothing.

Every score has an episode-bootstrap interval, and each control the paired interval of the probe's
margin over it. For a convolutional hook, ``--entity`` (agent, goal, or a kind: cheese, coin, saw,
...) ranks the channels whose centre of mass follows the entity's position in the frame
(:mod:`proclab.interpret.probes.spatial`), corrected over channels, for the agent and for the
random agent. Ground truth comes from the store (``proclab record`` stores it by default), so
nothing is replayed in the game.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.bases.activations import HOOK, episode_subset, read_activation, replay_agent
from proclab.interpret.probes.linear import (
    KINDS,
    EpisodeSums,
    constant_predictions,
    cross_validated,
    probe_kind,
    scored,
    shuffled_labels,
)
from proclab.interpret.probes.spatial import centres_of_mass, track_channels
from proclab.interpret.probes.targets import pixel_positions, target_values
from proclab.interpret.stats.corrections import CORRECTIONS
from proclab.interpret.workspace.args import AGENT, DATA, AnalysisArgs
from proclab.interpret.workspace.folder import Workspace
from proclab.interpret.workspace.progress import phases
from proclab.io.checkpoint import load_checkpoint, save_checkpoint
from proclab.io.configs import from_dict
from proclab.io.run_dirs import write_json_atomic
from proclab.models import AgentConfig, build_agent
from proclab.models.interventions import hook_shapes
from proclab.store import EpisodeStore

NAME = "probe"
CHUNK_EPISODES = 16
RANDOM_AGENT_SEED = 1_000_003


@dataclass(frozen=True)
class ProbeArgs(AnalysisArgs):
    """Probe: linear probes from any hook point to ground-truth features, with controls; channel tracking."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"max_steps": 4000}}

    seed: int = 0
    """Seed of the episode subset, the random agent's weights, the shuffled labels, the bootstrap and the
    permutations."""

    hook: str = "torso.hook_fc"
    """Hook point probed (any of the agent's: torso.block1.hook_out, torso.hook_relu, torso.hook_fc,
    core.0.hook_h, ...)."""
    target: tuple[str, ...] = ()
    """Ground-truth features or events to probe (e.g. goal_x goal_y agent_x cheese_dx); none: spatial only."""
    entity: tuple[str, ...] = ()
    """Conv hooks: entities whose position the channels may track (agent, goal, or a kind: cheese, coin, saw)."""
    data: DATA = None
    """Episode store recorded with ground truth (default: the folder's)."""
    agent: AGENT = None
    """Agent replayed for the hook (on --device, in fp32): a proclab run or checkpoint directory (default:
    the folder's, else the one that recorded the store)."""
    kind: str = "auto"
    """Probe: ridge (continuous), logistic (binary) or auto (logistic for 0/1 targets)."""
    folds: int = 5
    """Cross-validation folds (episodes as groups)."""
    max_steps: int = 20_000
    """Probe a seeded subset of whole episodes holding about this many steps."""
    bootstrap: int = 1000
    """Episode-bootstrap resamples of every interval."""
    permutations: int = 0
    """Spatial probes: episode permutations of each channel's test (0: enough that the correction over the
    channels can reach --alpha, 2 x channels / alpha; fewer can never make a channel significant)."""
    correction: str = "holm"
    """Spatial probes: multiple-comparison correction over channels (holm or bh)."""
    alpha: float = 0.05
    """Spatial probes: level of the corrected tests."""
    controls: tuple[str, ...] = ("random_agent", "shuffled_labels", "constant")
    """Controls reported beside each probe."""


CONTROLS = ("random_agent", "shuffled_labels", "constant")


def random_agent_checkpoint(checkpoint: Path, out: Path, seed: int) -> Path:
    """A randomly initialised agent of ``checkpoint``'s architecture, saved with its metadata."""
    ckpt = load_checkpoint(checkpoint, kind="agent")
    torch.manual_seed(RANDOM_AGENT_SEED + seed)  # not a seed a trainer would start from
    agent = build_agent(from_dict(AgentConfig, ckpt.meta["agent"]))
    meta = {k: v for k, v in ckpt.meta.items() if k not in ("crc32", "saved_at")}
    return save_checkpoint(out, agent.state_dict(), meta | {"random_init_of": str(checkpoint), "step": 0})


def replayed(store, hook: str, episodes: np.ndarray, checkpoint: Path, runtime, shape, reduce=None):
    """The hook's activation ``(N, D)`` (or ``reduce`` of its ``(n, *shape)`` rows, chunk by chunk, so conv
    maps of many steps need not fit in memory at once) and the episode of each row, replayed on ``runtime``."""

    parts, owners = [], []
    for lo in range(0, len(episodes), CHUNK_EPISODES):
        chunk = episodes[lo : lo + CHUNK_EPISODES]
        acts = read_activation(store, HOOK + hook, chunk, checkpoint=checkpoint, runtime=runtime)
        parts.append(acts.x if reduce is None else reduce(acts.x.reshape(-1, *shape)))
        owners.append(acts.episode)
    return np.concatenate(parts), np.concatenate(owners)


def probe_target(y, x, x_random, episode, args) -> dict:
    """One target: the probe and its controls, scored with intervals (NaN steps left out)."""

    ok = np.isfinite(y)
    if len(np.unique(episode[ok])) < 2:
        return {"skipped": "fewer than 2 episodes have this target"}
    y, x, episode = y[ok], x[ok], episode[ok]
    kind = probe_kind(y, args.kind)
    preds = {"probe": cross_validated(x, y, episode, kind, args.folds)}
    if "random_agent" in args.controls:
        preds["random_agent"] = cross_validated(x_random[ok], y, episode, kind, args.folds)
    if "shuffled_labels" in args.controls:
        control = shuffled_labels(y, episode, args.seed)
        preds["shuffled_labels"] = cross_validated(x, control, episode, kind, args.folds)
    sums = {name: EpisodeSums.of(y, p, episode, kind) for name, p in preds.items()}
    if "shuffled_labels" in sums:  # scored against the labels it was trained on
        sums["shuffled_labels"] = EpisodeSums.of(control, preds["shuffled_labels"], episode, kind)
    if "constant" in args.controls:
        sums["constant"] = EpisodeSums.of(
            y, constant_predictions(y, episode, kind, args.folds), episode, kind
        )
    metric = "accuracy" if kind == "logistic" else "r2"
    return {"kind": kind, "metric": metric, "steps": int(ok.sum())} | scored(sums, args.bootstrap, args.seed)


def _check(args: ProbeArgs) -> None:
    args.require_positive("folds", "max_steps", "bootstrap")
    if args.permutations < 0:
        raise ProclabError(f"--permutations must be >= 0 (0: automatic), got {args.permutations}")

    if args.kind not in KINDS:
        raise unknown_choice("--kind", args.kind, KINDS)
    if args.correction not in CORRECTIONS:
        raise unknown_choice("--correction", args.correction, CORRECTIONS)
    for c in args.controls:
        if c not in CONTROLS:
            raise unknown_choice("control", c, CONTROLS)
    if not args.target and not args.entity:
        raise ProclabError("give at least one --target FEATURE or --entity ENTITY to probe")


def run_probe(args: ProbeArgs) -> Path:

    start = time.time()
    _check(args)
    ws = Workspace.open(args.out)
    data = ws.input_path("data", args.data, "--data DATA")
    store = EpisodeStore(data)
    checkpoint = ws.agent_checkpoint(args.agent, store)
    ws.require_inputs(data=data)
    rt = args.runtime()
    agent = replay_agent(store, args.hook, checkpoint, rt)
    shape = hook_shapes(agent)[args.hook]
    if args.entity and len(shape) != 3:
        raise ProclabError(f"--entity needs a conv map; {args.hook} has per-sample shape {shape}")
    out = ws.command_dir(NAME)
    episodes = episode_subset(store, args.max_steps, args.seed)
    ys = {t: target_values(store, t, episodes) for t in args.target}  # refuses unknown names early
    agents = {"agent": checkpoint}
    if "random_agent" in args.controls:
        agents["random_agent"] = random_agent_checkpoint(checkpoint, out / "random_agent", args.seed)
    summary: dict = {
        "hook": args.hook,
        "shape": list(shape),
        "checkpoint": str(checkpoint),
        "data": str(data),
    }
    with phases(len(agents) + len(args.target) + len(args.entity), NAME) as ph:
        acts, centres = {}, {}
        for name, ckpt in agents.items():
            with ph.phase(f"replay: {name} ({len(episodes)} episodes)"):
                if args.target:
                    acts[name], episode = replayed(store, args.hook, episodes, ckpt, rt, shape)
                if args.entity:
                    centres[name], episode = replayed(
                        store, args.hook, episodes, ckpt, rt, shape, centres_of_mass
                    )
        summary["episodes"], summary["steps"] = len(episodes), len(episode)
        summary["probes"] = {}
        for t, y in ys.items():
            with ph.phase(f"probe {t}"):
                summary["probes"][t] = probe_target(y, acts["agent"], acts.get("random_agent"), episode, args)
        summary["tracking"] = {}
        for entity in args.entity:
            with ph.phase(f"channels tracking {entity}"):
                summary["tracking"][entity] = _tracking(store, entity, episodes, episode, centres, args)
    write_json_atomic(out / "summary.json", summary)
    _print(summary)
    ws.record_command(NAME, asdict(args), [str(out / "summary.json")], time.time() - start)
    return ws.final(out)


def _tracking(store, entity: str, episodes, episode, centres: dict, args) -> dict:

    position = pixel_positions(store, entity, episodes)
    options = dict(
        permutations=args.permutations,
        bootstrap=args.bootstrap,
        correction=args.correction,
        alpha=args.alpha,
        seed=args.seed,
    )
    out = {}
    for name, c in centres.items():
        rows = track_channels(c, position, episode, **options)
        out[name] = {"channels": rows, "significant": [r["channel"] for r in rows if r["significant"]]}
    return out


def _print(summary: dict) -> None:
    for t, r in summary["probes"].items():
        if "skipped" in r:
            print(f"{t}: skipped ({r['skipped']})")
            continue
        parts = [
            f"{name} {r[name]['score']:+.3f} [{r[name]['ci'][0]:+.3f}, {r[name]['ci'][1]:+.3f}]"
            for name in r
            if isinstance(r[name], dict)
        ]
        print(f"{t} ({r['metric']}): " + "; ".join(parts))
    for entity, by_agent in summary["tracking"].items():
        for name, r in by_agent.items():
            top = ", ".join(
                f"{c['channel']} ({c['score']:+.2f})" for c in r["channels"][:5] if c["score"] is not None
            )
            print(f"{entity}, {name}: {len(r['significant'])} channels track it after correction; top: {top}")
