"""Probes as a function: what an activation knows about the game, against its controls, on any agent.

For each target (a feature or event of the ground truth, e.g. ``goal_x`` or ``cheese_dx``;
:mod:`proclab.interpret.probes.targets`) a linear probe is cross-validated over episodes
(:mod:`proclab.interpret.probes.linear`) from the activation at a hook point, and reported beside:

* ``random_agent``: the same probe on the same hook of a randomly initialised agent of the same
  architecture (:func:`random_agent`, made in memory): how much a probe reads from the input through
  random features alone;
* ``control_task``: the same probe on Hewitt & Liang's (2019) control task, one random label per level
  (the same in every fold): what the probe's capacity buys by recognising levels;
* ``shuffled_labels``: the same probe on labels whose episodes were permuted (each episode gets
  another's course of the label): what the shape of a course over time buys;
* ``time_baseline``: the same probe on the step index (and its square) alone, what is known at the step:
  many targets grow with time, and a state that carries a clock reads them out as well;
* ``constant``: the training folds' mean (or majority class), the score of knowing nothing;
* ``agent_position`` (asked for by name, not a default): the same probe on the agent's own world position
  ``(x, y)`` at the step. The offset to a place that does not move within a level (CoinRun's end, Maze's
  corner) is that place minus the agent's position, so a state that knows where the agent is reads it out
  without representing the place: this control tells "knows the goal" from "knows where it is".

Every score has an episode-bootstrap interval, each control the paired interval of the probe's margin
over it, and the headline is the probe's margin over the *strongest* of its controls (Bonferroni over
the targets probed together). For a convolutional hook, *entities* (agent, goal, or a kind: cheese, coin, saw, ...)
rank the channels whose centre of mass follows the entity's position in the frame
(:mod:`proclab.interpret.probes.spatial`), corrected over channels, for the agent and for the random
agent. :func:`probe` runs all of it on a :class:`~proclab.record.rollout.Rollout` in memory;
``proclab analyze probe`` on a recorded store (both call :func:`probe_target` and :func:`tracking`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.probes.linear import (
    KINDS,
    MIN_EPISODES,
    EpisodeSums,
    check_folds,
    constant_predictions,
    control_task,
    cross_validated,
    probe_kind,
    scored,
    shuffled_labels,
    time_features,
)
from proclab.interpret.probes.spatial import best_channel_margin, centres_of_mass, track_channels
from proclab.interpret.probes.targets import RolloutTruth, Truth
from proclab.io.files import figure_and_axes
from proclab.io.progress import analysis_phases
from proclab.io.results import Result
from proclab.models.agent import Agent, build_agent
from proclab.models.edited import module_of
from proclab.models.loading import freeze
from proclab.stats.corrections import CORRECTIONS

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from proclab.models.edited import AgentLike
    from proclab.record.rollout import Rollout
    from proclab.run.runtime import Runtime

CONTROLS = ("random_agent", "control_task", "shuffled_labels", "time_baseline", "constant")
POSITION_CONTROL = "agent_position"
"""A control a probe runs only when asked (module docstring): the agent's own position."""
LABEL_CONTROLS = ("control_task", "shuffled_labels")  # scored against the labels they were trained on
RANDOM_AGENT_SEED = 1_000_003
REPLAY_FRAMES = 2048
"""Frames one forward pass of a replay holds at most (or one episode's, if longer): a conv torso's first maps
take 256 KB a frame, so 16 episodes of procgen's 1,000 steps at once would take gigabytes."""


@dataclass(frozen=True)
class ProbeSettings:
    """What :func:`probe` probes and how probes are fitted and judged (the options of ``proclab analyze
    probe``, same names and meanings)."""

    targets: tuple[str, ...] = ()
    """Features or events of the ground truth probed (:mod:`proclab.interpret.probes.targets`, e.g.
    ``coin_dx``); a single name or a list is taken as a tuple of one or more."""
    entities: tuple[str, ...] = ()
    """Entities (agent, goal, or a kind: cheese, coin, saw, ...) whose position the channels of a conv map are
    ranked on tracking."""
    kind: str = "auto"
    """ridge (continuous), logistic (binary) or auto (logistic for 0/1 targets)."""
    folds: int = 5
    """Cross-validation folds (and inner folds choosing the penalty), episodes as groups."""
    bootstrap: int = 1000
    """Episode-bootstrap resamples of every interval."""
    permutations: int = 0
    """Channel tracking: episode permutations per channel (0: enough for the correction)."""
    correction: str = "holm"
    """Channel tracking: holm or bh over channels."""
    alpha: float = 0.05
    """Channel tracking: level of the corrected tests."""
    controls: tuple[str, ...] = CONTROLS
    """The controls every probe is reported beside (module docstring)."""
    seed: int = 0
    """Label controls, the random agent's weights, bootstraps and permutations."""

    def __post_init__(self):
        for name in ("targets", "entities"):
            value = getattr(self, name)
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))

    def check(self) -> None:
        check_folds(self.folds)
        if self.bootstrap < 1:
            raise ProclabError(f"--bootstrap must be >= 1, got {self.bootstrap}")
        if self.permutations < 0:
            raise ProclabError(f"--permutations must be >= 0 (0: automatic), got {self.permutations}")
        if self.kind not in KINDS:
            raise unknown_choice("--kind", self.kind, KINDS)
        if self.correction not in CORRECTIONS:
            raise unknown_choice("--correction", self.correction, CORRECTIONS)
        for c in self.controls:
            if c not in (*CONTROLS, POSITION_CONTROL):
                raise unknown_choice("control", c, (*CONTROLS, POSITION_CONTROL))


@dataclass(frozen=True)
class Probes(Result):
    """Per target, the probe and its controls (score, interval, the probe's margin over each control) and the
    headline, ``probes[target]["headline"]``: the probe's margin over the strongest control, with its
    interval (Bonferroni over the targets); per entity and agent, the channels that track it."""

    hook: str
    shape: list[int]
    episodes: int
    steps: int
    probes: dict = field(default_factory=dict)
    tracking: dict = field(default_factory=dict)

    def table(self) -> list[dict]:
        """One row per target and model; the probe's row carries the headline (margin over the strongest
        control), each control's row the probe's margin over it."""
        rows = []
        for target, r in self.probes.items():
            if "skipped" in r:
                rows.append({"target": target, "model": "-", "skipped": r["skipped"]})
                continue
            h = r.get("headline", {})
            for name in ("probe", *CONTROLS):
                if name not in r:
                    continue
                v = r[name]
                margin = h if name == "probe" else v.get("probe_margin", {})
                rows.append({
                    "target": target,
                    "model": name,
                    r["metric"]: v["score"],
                    "ci": tuple(v["ci"]),
                    "vs": h.get("strongest_control") if name == "probe" else name,
                    "probe margin": margin.get("margin", margin.get("value")),
                    "margin ci": tuple(margin["ci"]) if margin else None,
                    "above": margin.get("significant"),
                })  # fmt: skip
        for entity, by_agent in self.tracking.items():
            for name, t in by_agent.items():
                rows.append(
                    {"target": f"{entity} (channels)", "model": name, "significant": t["significant"]}
                )
        return rows

    def plot(self, ax: Axes | None = None) -> Figure:
        """Per target, the probe's score beside its controls', with their 95 % intervals."""
        scored = {t: r for t, r in self.probes.items() if "skipped" not in r}
        if not scored:
            raise ProclabError("no target was probed (every one was skipped)")
        fig, ax = figure_and_axes(ax, (1.8 + 1.6 * len(scored), 3.2))
        models = [m for m in ("probe", *CONTROLS) if any(m in r for r in scored.values())]
        width = 0.8 / len(models)
        for k, m in enumerate(models):
            xs, ys, lo, hi = [], [], [], []
            for i, r in enumerate(scored.values()):
                if m in r:
                    xs.append(i + (k - (len(models) - 1) / 2) * width)
                    ys.append(r[m]["score"])
                    lo.append(r[m]["score"] - r[m]["ci"][0])
                    hi.append(r[m]["ci"][1] - r[m]["score"])
            ax.bar(xs, ys, width, yerr=[lo, hi], label=m.replace("_", " "), capsize=2)
        ax.set_xticks(range(len(scored)), list(scored))
        ax.set_ylabel("held-out score (R^2 or accuracy)")
        ax.set_title(f"probes at {self.hook}", fontsize=9)
        ax.axhline(0, color="black", lw=0.5)
        ax.legend(fontsize=7)
        return fig


def random_agent(agent: AgentLike, seed: int = 0, runtime: Runtime | None = None) -> AgentLike:
    """A randomly initialised agent of ``agent``'s architecture (weights seeded apart from any a trainer
    starts from), frozen, on the same device: a proclab agent is built afresh from its config; any other
    module is copied and every submodule's ``reset_parameters`` run."""
    torch.manual_seed(RANDOM_AGENT_SEED + seed)
    if isinstance(agent, Agent):
        fresh = build_agent(agent.config)
        rt = runtime or getattr(agent, "runtime", None)
        if rt is not None:
            fresh = rt.prepare(fresh)
        fresh.env_config, fresh.runtime = agent.env_config, agent.runtime
        fresh.source = f"random init of {agent.source}"
        return freeze(fresh)
    fresh = copy.deepcopy(agent)
    module = module_of(fresh)
    for m in module.modules():
        reset = getattr(m, "reset_parameters", None)
        if callable(reset):
            reset()
    freeze(module)
    return fresh


def probe_target(
    y, x, x_random, episode, level, settings: ProbeSettings, family: int = 1, position=None
) -> dict:
    """One target: the probe and its controls, scored with intervals (NaN steps left out); rows are
    episode after episode in step order, ``level`` each row's level, ``position`` each row's agent ``(x, y)``
    (needed by the ``agent_position`` control alone); ``family``: how many targets are
    reported together (the headline's Bonferroni correction). ``per_episode`` keeps each model's
    per-episode sums (:class:`~proclab.interpret.probes.linear.EpisodeSums`, episodes in ``episodes``'s
    order), from which every score and interval here can be recomputed, and targets compared paired by
    episode (:mod:`proclab.interpret.goals.detect_probes`)."""
    ok = np.isfinite(y)
    if len(np.unique(episode[ok])) < MIN_EPISODES:
        return {"skipped": f"fewer than {MIN_EPISODES} episodes have this target"}
    clock = time_features(episode)[ok]  # the step index counts the NaN steps too
    y, x, episode, level = y[ok], x[ok], episode[ok], level[ok]
    kind = probe_kind(y, settings.kind)

    def fit(inputs, labels=y):
        return cross_validated(inputs, labels, episode, kind, settings.folds)

    labels = {"probe": y}
    preds = {"probe": fit(x)}
    if "random_agent" in settings.controls:
        preds["random_agent"] = fit(x_random[ok])
    if "control_task" in settings.controls:
        labels["control_task"] = control_task(y, level, settings.seed)
    if "shuffled_labels" in settings.controls:
        labels["shuffled_labels"] = shuffled_labels(y, episode, settings.seed)
    for name in LABEL_CONTROLS:
        if name in labels:
            preds[name] = fit(x, labels[name])
    if "time_baseline" in settings.controls:
        preds["time_baseline"] = fit(clock)
    if POSITION_CONTROL in settings.controls:
        if position is None:
            raise ProclabError("the agent_position control needs the agent's position at every step")
        preds[POSITION_CONTROL] = fit(np.asarray(position, np.float64)[ok])
    if "constant" in settings.controls:
        preds["constant"] = constant_predictions(y, episode, kind, settings.folds)
    sums = {name: EpisodeSums.of(labels.get(name, y), p, episode, kind) for name, p in preds.items()}
    metric = "accuracy" if kind == "logistic" else "r2"
    per_episode = {"episodes": np.unique(episode).tolist()} | {n: s.to_dict() for n, s in sums.items()}
    return (
        {"kind": kind, "metric": metric, "steps": int(ok.sum())}
        | scored(sums, settings.bootstrap, settings.seed, family)
        | {"per_episode": per_episode}
    )


def tracking(truth: Truth, entity: str, episode, centres: dict, settings: ProbeSettings) -> dict:
    """Per agent (``centres``: name -> each row's channels' centres of mass), the channels whose centre
    follows ``entity``'s pixel position, ranked, tested and corrected over channels; with both ``agent`` and
    ``random_agent``, ``agent``'s ``best_vs_random_agent``: its best channel against the random agent's best,
    paired over episodes (:func:`~proclab.interpret.probes.spatial.best_channel_margin`)."""
    position = truth.pixel_positions(entity)
    out = {}
    for name, c in centres.items():
        rows = track_channels(
            c,
            position,
            episode,
            permutations=settings.permutations,
            bootstrap=settings.bootstrap,
            correction=settings.correction,
            alpha=settings.alpha,
            seed=settings.seed,
        )
        out[name] = {"channels": rows, "significant": [r["channel"] for r in rows if r["significant"]]}
    if "agent" in centres and "random_agent" in centres:
        out["agent"]["best_vs_random_agent"] = best_channel_margin(
            centres["agent"],
            centres["random_agent"],
            position,
            episode,
            bootstrap=settings.bootstrap,
            seed=settings.seed,
        )
    return out


def agent_position(truth: Truth, settings: ProbeSettings) -> np.ndarray | None:
    """``(N, 2)``: the agent's world ``(x, y)`` at every row, where the ``agent_position`` control asks for it."""
    return np.stack(truth.world_positions("agent"), 1) if POSITION_CONTROL in settings.controls else None


def replay_batch(rollout) -> int:
    """Episodes replayed together: as many as :data:`REPLAY_FRAMES` frames of the longest episode allow."""
    return max(1, REPLAY_FRAMES // max(1, int(rollout.mask.shape[0])))


def probe(
    rollout: Rollout,
    hook: str,
    *,
    agent: AgentLike | None = None,
    settings: ProbeSettings = ProbeSettings(),
    progress: bool = True,
) -> Probes:
    """Probes of ``settings.targets`` and channel tracking of ``settings.entities`` at ``hook``, on the episodes
    of ``rollout`` (played with ``truth=True``): the activations of ``agent`` (default: the agent that played,
    whose cache the rollout may already hold) on its frames; the random-agent control is made in memory.
    ``progress``: show the replays, probes and tracking as they run."""
    settings.check()
    targets, entities = settings.targets, settings.entities
    if not targets and not entities:
        raise ProclabError("give at least one target (a feature or event) or entity to probe")
    played = agent is None or agent is rollout.agent  # the rollout's cache is the agent's own
    agent = agent if agent is not None else rollout.agent
    truth = RolloutTruth(rollout)
    ys = {t: truth.values(t) for t in targets}  # refuses unknown names early
    controlled = "random_agent" in settings.controls
    if controlled and agent is None:
        raise ProclabError("the random-agent control needs the agent: pass agent= (or drop the control)")
    with analysis_phases(progress, 1 + controlled + len(targets) + len(entities), "probe") as ph:
        with ph.phase(f"activations at {hook}"):
            if played and hook in rollout.cache:
                x, episode, _ = rollout.cache.packed(hook)
            else:
                x, episode, _ = rollout.replay(agent, [hook], batch=replay_batch(rollout)).packed(hook)
        episode = episode.numpy()
        shape = tuple(x.shape[1:])
        acts = {"agent": x.reshape(len(x), -1).float().numpy()}
        if controlled:
            assert agent is not None  # refused above without one
            with ph.phase("replay: random agent"):
                xr, _, _ = rollout.replay(
                    random_agent(agent, settings.seed), [hook], batch=replay_batch(rollout)
                ).packed(hook)
            acts["random_agent"] = xr.reshape(len(xr), -1).float().numpy()
        if entities and len(shape) != 3:
            raise ProclabError(f"entities need a conv map; {hook} has per-sample shape {shape}")
        level = np.asarray(rollout.levels)[episode]
        position = agent_position(truth, settings)
        result = {}
        for t, y in ys.items():
            with ph.phase(f"probe {t}"):
                result[t] = probe_target(
                    y, acts["agent"], acts.get("random_agent"), episode, level, settings, len(ys), position
                )
        centres = {n: centres_of_mass(a.reshape(-1, *shape)) for n, a in acts.items()} if entities else {}
        tracked = {}
        for e in entities:
            with ph.phase(f"channels tracking {e}"):
                tracked[e] = tracking(truth, e, episode, centres, settings)
    return Probes(hook, list(shape), rollout.num_episodes, len(x), result, tracked)


__all__ = [
    "CONTROLS",
    "POSITION_CONTROL",
    "ProbeSettings",
    "Probes",
    "probe",
    "probe_target",
    "random_agent",
    "tracking",
]
