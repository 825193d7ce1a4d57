"""Probes of many agents as one call: each agent plays, is probed, and its probes come back in agent order.

Whether an agent's activation encodes the cheese's position is a claim about one agent; whether agents of a
setting learn to encode it is a claim about a population of them. :func:`probe_agents` probes every agent (a run
or checkpoint directory, a shipped agent's name, or a population folder standing for its members,
:func:`~proclab.rl.population.agent_sources`) the one way one agent is probed: it plays a rollout with the
game's ground truth (:func:`~proclab.record.rollout.rollout`, ``truth=True``, the hook cached) and fits the
probes and their controls on it (:func:`~proclab.interpret.probes.probe.probe`). One agent is one unit of
:func:`~proclab.run.parts.run_parts`: in this process one after another, in local processes, or as Ray tasks;
each unit seeds its own play and fits from :class:`ProbeAgentsSettings`' seed, so where it ran changes nothing
(given the same device, precision and threads, the probes are the same, bit for bit). With ``folder``, each
agent's probes are saved there as they come back, and a second call probes only the agents not yet saved.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch

from proclab.errors import ProclabError
from proclab.interpret.probes.probe import Probes, ProbeSettings, probe
from proclab.io.results import Result
from proclab.models.loading import load
from proclab.record.rollout import rollout
from proclab.rl.population import agent_sources
from proclab.run.parts import Parts, fingerprint_of
from proclab.run.runtime import torch_threads
from proclab.run.tasks import TaskSettings


@dataclass(frozen=True)
class ProbeAgentsSettings(ProbeSettings):
    """What :func:`probe_agents` plays with each agent and probes on it: :class:`ProbeSettings`' fields (the
    probes, their controls, and the seed, also of each agent's play) and the play's."""

    levels: str = "held-out"
    """Levels each agent plays: ``held-out`` (the levels after its training levels), a named split or
    START:NUM."""
    episodes: int = 32
    """Complete episodes each agent plays (and is probed on)."""
    greedy: bool = False
    """Most likely actions instead of sampled ones."""
    num_envs: int = 16
    """Episodes played at once."""
    device: str = "cpu"
    """Where each agent plays and is replayed (``cpu``, ``cuda``, ``auto``); in fp32, as probes read activations."""
    threads: int = 0
    """Torch threads of each agent's unit (0: torch's default here, a share of the cores with local workers or
    Ray)."""

    def probe_settings(self) -> ProbeSettings:
        """The probes' own settings (this class's fields of :class:`ProbeSettings`)."""
        return ProbeSettings(**{f.name: getattr(self, f.name) for f in fields(ProbeSettings)})

    def check(self) -> None:
        super().check()
        if self.episodes < 2 or self.num_envs < 1:
            raise ProclabError(
                f"episodes must be >= 2 and num_envs >= 1, got {self.episodes} and {self.num_envs}"
            )


@dataclass(frozen=True)
class ProbesByAgent(Result):
    """Every agent's probes: ``agents[i]`` (as named) probed as ``probes[i]``."""

    hook: str
    agents: tuple[str, ...] = ()
    probes: tuple[Probes, ...] = field(default_factory=tuple)

    def table(self) -> list[dict]:
        """:meth:`Probes.table` of every agent, agent after agent, each row with its agent's name first."""
        return [
            {"agent": name, **row}
            for name, p in zip(self.agents, self.probes, strict=True)
            for row in p.table()
        ]


@dataclass(frozen=True)
class _Job:
    """One agent with everything its probes need (in this process, a spawned one or a Ray task)."""

    path: Path
    hook: str
    settings: ProbeAgentsSettings


def probe_one(job: _Job) -> Probes:
    """One agent played with the game's ground truth and probed (module docstring)."""
    s = job.settings
    with torch_threads(s.threads or torch.get_num_threads()):
        agent = load(job.path, s.device, "fp32")
        played = rollout(
            agent, levels=s.levels, episodes=s.episodes, cache=[job.hook], truth=True, greedy=s.greedy,
            seed=s.seed, num_envs=s.num_envs,
        )  # fmt: skip
        return probe(played, job.hook, settings=s.probe_settings(), progress=False)


def probe_agents(
    agents: list[str | Path] | tuple[str | Path, ...],
    hook: str,
    *,
    tasks: TaskSettings = TaskSettings(),
    folder: str | Path | None = None,
    settings: ProbeAgentsSettings = ProbeAgentsSettings(),
    progress: bool = True,
) -> ProbesByAgent:
    """Probe ``hook`` of every agent of ``agents`` (run or checkpoint directories, shipped agents' names,
    population folders), each agent a unit run where ``tasks`` says, and return the probes in the agents' order
    (module docstring). ``folder``: keep each agent's probes there as they arrive, and probe only the missing
    ones on a second call. An agent that fails does not stop the others; the first failure is raised once they
    are done."""
    settings.check()
    if not settings.targets and not settings.entities:
        raise ProclabError("give at least one target (a feature or event) or entity to probe")
    sources = agent_sources(agents)
    tasks.check()
    settings = ProbeAgentsSettings(**{**asdict(settings), "threads": tasks.unit_threads(settings.threads)})
    fingerprint = fingerprint_of(
        asdict(settings), ("threads",), hook=hook, agents=[str(p) for _, p in sources]
    )
    store = Parts(len(sources), None if folder is None else Path(folder), fingerprint, job="probing")
    probes = store.run(
        probe_one,
        lambda i: _Job(sources[i][1], hook, settings),
        tasks,
        arrays=Probes.to_arrays,
        of_arrays=Probes.from_arrays,
        title="probe",
        progress=progress,
    )
    return ProbesByAgent(hook, tuple(name for name, _ in sources), tuple(probes))
