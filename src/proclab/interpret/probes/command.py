"""``proclab analyze probe``: what an activation knows about the game, against its controls, on a store.

Parse -> call -> write: the episodes of ``--data`` (a seeded subset of about ``--max-steps`` steps) are
replayed through ``--agent`` and a randomly initialised agent of its architecture (made in memory), and
:mod:`proclab.interpret.probes.probe` fits and judges the probes of each ``--target`` and the channel
tracking of each ``--entity``; ground truth comes from the store (``proclab record`` stores it by
default), so nothing is played in the game. Each target's headline is the probe's margin over the
strongest of its controls. ``ANALYSIS/probe/summary.json`` holds every number.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from proclab.errors import ProclabError
from proclab.interpret.bases.activations import HOOK, episode_subset, read_activation, replay_agent
from proclab.interpret.probes.probe import (
    CONTROLS,
    ProbeSettings,
    agent_position,
    probe_target,
    random_agent,
    tracking,
)
from proclab.interpret.probes.spatial import centres_of_mass
from proclab.interpret.probes.targets import StoreTruth
from proclab.interpret.workspace.command import AGENT, DATA, AnalysisArgs
from proclab.interpret.workspace.folder import Workspace
from proclab.io.arguments import settings_from
from proclab.io.progress import phases
from proclab.io.run_dirs import write_json_atomic
from proclab.models.edited import hook_shapes
from proclab.store import EpisodeStore

NAME = "probe"
CHUNK_EPISODES = 16


@dataclass(frozen=True)
class ProbeArgs(AnalysisArgs):
    """Probe: linear probes from any hook point to ground-truth features, with controls; channel tracking."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"max_steps": 4000}}

    seed: int = 0
    """Seed of the episode subset, the random agent's weights, the label controls, the bootstrap and the
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
    """Cross-validation folds, episodes as groups (>= 2); the same number of inner folds over each training
    fold's episodes chooses the penalty."""
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
    controls: tuple[str, ...] = CONTROLS
    """Controls reported beside each probe (random_agent, control_task, shuffled_labels, time_baseline,
    constant; also agent_position, not by default: a probe of the agent's own position, the control for the
    offset to a place that does not move); the headline is the probe's margin over the strongest."""


def replayed(store, hook: str, episodes: np.ndarray, agent, shape, reduce=None):
    """The hook's activation ``(N, D)`` (or ``reduce`` of its ``(n, *shape)`` rows, chunk by chunk, so conv
    maps of many steps need not fit in memory at once) and the episode of each row, ``agent`` replayed."""

    parts, owners = [], []
    for lo in range(0, len(episodes), CHUNK_EPISODES):
        chunk = episodes[lo : lo + CHUNK_EPISODES]
        acts = read_activation(store, HOOK + hook, chunk, agent=agent)
        parts.append(acts.x if reduce is None else reduce(acts.x.reshape(-1, *shape)))
        owners.append(acts.episode)
    return np.concatenate(parts), np.concatenate(owners)


def run_probe(args: ProbeArgs) -> Path:

    start = time.time()
    args.require_positive("max_steps")
    settings = settings_from(args, ProbeSettings, targets=args.target, entities=args.entity)
    settings.check()
    if not args.target and not args.entity:
        raise ProclabError("give at least one --target FEATURE or --entity ENTITY to probe")
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
    truth = StoreTruth(store, episodes)
    ys = {t: truth.values(t) for t in args.target}  # refuses unknown names early
    agents = {"agent": agent}
    if "random_agent" in args.controls:
        agents["random_agent"] = random_agent(agent, args.seed, rt)
    summary: dict = {
        "hook": args.hook,
        "shape": list(shape),
        "checkpoint": str(checkpoint),
        "data": str(data),
    }
    with phases(len(agents) + len(args.target) + len(args.entity), NAME) as ph:
        acts, centres = {}, {}
        for name, a in agents.items():
            with ph.phase(f"replay: {name} ({len(episodes)} episodes)"):
                if args.target:
                    acts[name], episode = replayed(store, args.hook, episodes, a, shape)
                if args.entity:
                    centres[name], episode = replayed(store, args.hook, episodes, a, shape, centres_of_mass)
        summary["episodes"], summary["steps"] = len(episodes), len(episode)
        level = np.asarray(store.episodes["level_seed"])[episode]
        summary["probes"] = {}
        position = agent_position(truth, settings)
        for t, y in ys.items():
            with ph.phase(f"probe {t}"):
                summary["probes"][t] = probe_target(
                    y, acts["agent"], acts.get("random_agent"), episode, level, settings, len(ys), position
                )
        summary["tracking"] = {}
        for entity in args.entity:
            with ph.phase(f"channels tracking {entity}"):
                summary["tracking"][entity] = tracking(truth, entity, episode, centres, settings)
    write_json_atomic(out / "summary.json", summary)
    _print(summary)
    ws.record_command(NAME, asdict(args), [str(out / "summary.json")], time.time() - start)
    return ws.final(out)


def _print(summary: dict) -> None:
    for t, r in summary["probes"].items():
        if "skipped" in r:
            print(f"{t}: skipped ({r['skipped']})")
            continue
        parts = [
            f"{name} {r[name]['score']:+.3f} [{r[name]['ci'][0]:+.3f}, {r[name]['ci'][1]:+.3f}]"
            for name in r
            if isinstance(r[name], dict) and "score" in r[name]
        ]
        print(f"{t} ({r['metric']}): " + "; ".join(parts))
        if "headline" in r:
            h = r["headline"]
            verdict = "above it" if h["significant"] else "not above it"
            print(
                f"  probe minus the strongest control ({h['strongest_control']}): {h['margin']:+.3f} "
                f"[{h['ci'][0]:+.3f}, {h['ci'][1]:+.3f}] ({100 * h['level']:.1f} % interval, Bonferroni over "
                f"{len(summary['probes'])} targets): {verdict}"
            )
    for entity, by_agent in summary["tracking"].items():
        for name, r in by_agent.items():
            top = ", ".join(
                f"{c['channel']} ({c['score']:+.2f})" for c in r["channels"][:5] if c["score"] is not None
            )
            print(f"{entity}, {name}: {len(r['significant'])} channels track it after correction; top: {top}")
