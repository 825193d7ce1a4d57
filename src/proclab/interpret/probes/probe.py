"""Probes as a function: what an activation knows about the game, against its controls, on any agent.

For each target (a feature or event of the ground truth, e.g. ``goal_x`` or ``cheese_dx``;
:mod:`proclab.interpret.probes.targets`) a linear probe is cross-validated over episodes
(:mod:`proclab.interpret.probes.linear`) from the activation at a hook point, and reported beside:

* ``random_agent``: the same probe on the same hook of a randomly initialised agent of the same
  architecture (:func:`random_agent`, made in memory): how much a probe reads from the input through
  random features alone;
* ``shuffled_labels``: the same probe on labels whose episodes were permuted (the control task of
  Hewitt & Liang 2019; the probe's margin over it is its *selectivity*);
* ``constant``: the training folds' mean (or majority class), the score of knowing nothing.

Every score has an episode-bootstrap interval, and each control the paired interval of the probe's
margin over it. For a convolutional hook, *entities* (agent, goal, or a kind: cheese, coin, saw, ...)
rank the channels whose centre of mass follows the entity's position in the frame
(:mod:`proclab.interpret.probes.spatial`), corrected over channels, for the agent and for the random
agent. :func:`probe` runs all of it on a :class:`~proclab.record.rollout.Rollout` in memory;
``proclab analyze probe`` on a recorded store (both call :func:`probe_target` and :func:`tracking`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import torch

from proclab.errors import ProclabError, unknown_choice
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
from proclab.interpret.probes.targets import RolloutTruth, Truth
from proclab.interpret.stats.corrections import CORRECTIONS
from proclab.io.files import pyplot
from proclab.io.results import Result
from proclab.models.agent import Agent, build_agent
from proclab.models.loading import freeze

CONTROLS = ("random_agent", "shuffled_labels", "constant")
RANDOM_AGENT_SEED = 1_000_003


@dataclass(frozen=True)
class ProbeSettings:
    """How probes are fitted and judged (the options of ``proclab analyze probe``)."""

    kind: str = "auto"  # ridge (continuous), logistic (binary) or auto (logistic for 0/1 targets)
    folds: int = 5  # cross-validation folds, episodes as groups
    bootstrap: int = 1000  # episode-bootstrap resamples of every interval
    permutations: int = 0  # channel tracking: episode permutations per channel (0: enough for the correction)
    correction: str = "holm"  # channel tracking: holm or bh over channels
    alpha: float = 0.05  # channel tracking: level of the corrected tests
    controls: tuple[str, ...] = CONTROLS
    seed: int = 0  # shuffled labels, the random agent's weights, bootstraps and permutations

    def check(self) -> None:
        for name in ("folds", "bootstrap"):
            if getattr(self, name) < 1:
                raise ProclabError(f"--{name} must be >= 1, got {getattr(self, name)}")
        if self.permutations < 0:
            raise ProclabError(f"--permutations must be >= 0 (0: automatic), got {self.permutations}")
        if self.kind not in KINDS:
            raise unknown_choice("--kind", self.kind, KINDS)
        if self.correction not in CORRECTIONS:
            raise unknown_choice("--correction", self.correction, CORRECTIONS)
        for c in self.controls:
            if c not in CONTROLS:
                raise unknown_choice("control", c, CONTROLS)


@dataclass(frozen=True)
class Probes(Result):
    """Per target, the probe and its controls (score, interval, the probe's margin over each control); per
    entity and agent, the channels that track it."""

    hook: str
    shape: list[int]
    episodes: int
    steps: int
    probes: dict = field(default_factory=dict)
    tracking: dict = field(default_factory=dict)

    def table(self) -> list[dict]:
        rows = []
        for target, r in self.probes.items():
            if "skipped" in r:
                rows.append({"target": target, "model": "-", "skipped": r["skipped"]})
                continue
            for name, v in r.items():
                if isinstance(v, dict):
                    margin = v.get("probe_margin", {})
                    rows.append({
                        "target": target,
                        "model": name,
                        r["metric"]: v["score"],
                        "ci": tuple(v["ci"]),
                        "probe margin": margin.get("value"),
                        "margin ci": tuple(margin["ci"]) if margin else None,
                    })  # fmt: skip
        for entity, by_agent in self.tracking.items():
            for name, t in by_agent.items():
                rows.append(
                    {"target": f"{entity} (channels)", "model": name, "significant": t["significant"]}
                )
        return rows

    def plot(self, ax=None):
        """Per target, the probe's score beside its controls', with their 95 % intervals."""
        plt = pyplot()
        scored = {t: r for t, r in self.probes.items() if "skipped" not in r}
        if not scored:
            raise ProclabError("no target was probed (every one was skipped)")
        fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(1.8 + 1.6 * len(scored), 3.2))
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


def random_agent(agent, seed: int = 0, runtime=None):
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
    for m in fresh.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()
    return freeze(fresh)


def probe_target(y, x, x_random, episode, settings: ProbeSettings) -> dict:
    """One target: the probe and its controls, scored with intervals (NaN steps left out)."""
    ok = np.isfinite(y)
    if len(np.unique(episode[ok])) < 2:
        return {"skipped": "fewer than 2 episodes have this target"}
    y, x, episode = y[ok], x[ok], episode[ok]
    kind = probe_kind(y, settings.kind)
    preds = {"probe": cross_validated(x, y, episode, kind, settings.folds)}
    if "random_agent" in settings.controls:
        preds["random_agent"] = cross_validated(x_random[ok], y, episode, kind, settings.folds)
    if "shuffled_labels" in settings.controls:
        control = shuffled_labels(y, episode, settings.seed)
        preds["shuffled_labels"] = cross_validated(x, control, episode, kind, settings.folds)
    sums = {name: EpisodeSums.of(y, p, episode, kind) for name, p in preds.items()}
    if "shuffled_labels" in sums:  # scored against the labels it was trained on
        sums["shuffled_labels"] = EpisodeSums.of(control, preds["shuffled_labels"], episode, kind)
    if "constant" in settings.controls:
        sums["constant"] = EpisodeSums.of(
            y, constant_predictions(y, episode, kind, settings.folds), episode, kind
        )
    metric = "accuracy" if kind == "logistic" else "r2"
    return {"kind": kind, "metric": metric, "steps": int(ok.sum())} | scored(
        sums, settings.bootstrap, settings.seed
    )


def tracking(truth: Truth, entity: str, episode, centres: dict, settings: ProbeSettings) -> dict:
    """Per agent (``centres``: name -> each row's channels' centres of mass), the channels whose centre
    follows ``entity``'s pixel position, ranked, tested and corrected over channels."""
    position = truth.pixel_positions(entity)
    options = dict(
        permutations=settings.permutations,
        bootstrap=settings.bootstrap,
        correction=settings.correction,
        alpha=settings.alpha,
        seed=settings.seed,
    )
    out = {}
    for name, c in centres.items():
        rows = track_channels(c, position, episode, **options)
        out[name] = {"channels": rows, "significant": [r["channel"] for r in rows if r["significant"]]}
    return out


def probe(
    rollout,
    hook: str,
    targets: tuple[str, ...] | str = (),
    entities: tuple[str, ...] | str = (),
    *,
    agent=None,
    settings: ProbeSettings = ProbeSettings(),
) -> Probes:
    """Probes of ``targets`` and channel tracking of ``entities`` at ``hook``, on the episodes of ``rollout``
    (played with ``truth=True``): the activations of ``agent`` (default: the agent that played, whose cache
    the rollout may already hold) on its frames; the random-agent control is made in memory."""
    targets = (targets,) if isinstance(targets, str) else tuple(targets)
    entities = (entities,) if isinstance(entities, str) else tuple(entities)
    settings.check()
    if not targets and not entities:
        raise ProclabError("give at least one target (a feature or event) or entity to probe")
    played = agent is None or agent is rollout.agent  # the rollout's cache is the agent's own
    agent = agent if agent is not None else rollout.agent
    truth = RolloutTruth(rollout)
    ys = {t: truth.values(t) for t in targets}  # refuses unknown names early
    if played and hook in rollout.cache:
        x, episode, _ = rollout.cache.rows(hook)
    else:
        x, episode, _ = rollout.replay(agent, [hook]).rows(hook)
    shape = tuple(x.shape[1:])
    acts = {"agent": x.reshape(len(x), -1).float().numpy()}
    if "random_agent" in settings.controls:
        if agent is None:
            raise ProclabError("the random-agent control needs the agent: pass agent= (or drop the control)")
        xr, _, _ = rollout.replay(random_agent(agent, settings.seed), [hook]).rows(hook)
        acts["random_agent"] = xr.reshape(len(xr), -1).float().numpy()
    if entities and len(shape) != 3:
        raise ProclabError(f"entities need a conv map; {hook} has per-sample shape {shape}")
    result = {
        t: probe_target(y, acts["agent"], acts.get("random_agent"), episode, settings) for t, y in ys.items()
    }
    centres = {name: centres_of_mass(a.reshape(-1, *shape)) for name, a in acts.items()} if entities else {}
    tracked = {e: tracking(truth, e, episode, centres, settings) for e in entities}
    return Probes(hook, list(shape), rollout.num_episodes, len(x), result, tracked)


__all__ = ["CONTROLS", "ProbeSettings", "Probes", "probe", "probe_target", "random_agent", "tracking"]
