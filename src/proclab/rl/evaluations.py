"""Many agents evaluated as one call: one unit per agent, where there is room, rows merged in agent order.

A population's members, the seeds of a setting, a run's checkpoints next to a shipped agent: comparing agents
means evaluating each on the same levels with the same settings. :func:`evaluate_agents` plays every agent
with :func:`~proclab.rl.evaluate.evaluate_agent` (the one way an agent is evaluated, so each agent's numbers
are those ``proclab eval --agent`` gives it alone) and returns one table (:class:`Evaluations`): a row per
agent, split and game.

**Agents** are named as :func:`proclab.load` names them (a run or checkpoint directory, a shipped agent's name),
or by a population folder (``proclab population --out``), which stands for the runs of its members that trained,
in its ``population.csv``'s order.

**Where.** Each agent is a unit of :func:`~proclab.run.parts.run_parts`: in this process one after another, in
``workers`` local processes, or as Ray tasks (:class:`~proclab.run.tasks.TaskSettings`). An agent's evaluation
seeds itself (``EvalSettings.seed``) before it plays, so where it ran, and beside which others, changes
nothing: given the same torch threads, device and precision, the rows are the same, bit for bit. Agents are
not split further by level split: an agent's splits play one after the other from one seeded start, as
``proclab eval`` plays them.

**Resuming.** With ``folder``, each agent's results are saved there (atomically) as they come back, with a
fingerprint of the settings and agents; the same call again plays only the agents not yet saved.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
from rich.console import Console

from proclab.io.checkpoint import find_checkpoint
from proclab.io.results import Result
from proclab.rl.evaluate import EvalSettings, evaluate_agent
from proclab.rl.population import agent_sources
from proclab.run.parts import Parts, fingerprint_of
from proclab.run.runtime import RuntimeConfig
from proclab.run.tasks import TaskSettings

ROW_KEYS = ("split", "game", "episodes", "return_mean", "return_std", "return_sem", "length_mean",
            "level_complete_rate", "normalized_score")  # fmt: skip
"""The columns of a split's row that :meth:`Evaluations.table` shows (``evaluate_agent``'s, goals apart)."""


@dataclass(frozen=True)
class Evaluations(Result):
    """Every agent's evaluation: ``agents[i]`` (as named) played with ``tables[i]`` as results (the JSON of
    ``proclab eval --agent`` for that agent alone)."""

    agents: tuple[str, ...] = ()
    tables: tuple[dict, ...] = field(default_factory=tuple)

    def table(self) -> list[dict]:
        """One row per agent, split and game (agents in the order given): the agent, its checkpoint and step, and
        the split's returns, lengths, completion and normalised score; with goals tracked, each goal's rate;
        with the random baseline, the random agent's rows after each agent's (``agent`` ends in ``(random)``)."""
        rows = []
        for name, t in zip(self.agents, self.tables, strict=True):
            for policy, split_rows in ((name, t["rows"]), (f"{name} (random)", t.get("random", []))):
                for r in split_rows:
                    goals = {f"{g}_rate": v["rate"] for g, v in r.get("goals", {}).items()}
                    rows.append({
                        "agent": policy, "checkpoint": t["checkpoint"], "step": t["step"],
                        **{k: r[k] for k in ROW_KEYS}, **goals,
                    })  # fmt: skip
        return rows


@dataclass(frozen=True)
class _Job:
    """One agent with everything its evaluation needs (in this process, a spawned one or a Ray task)."""

    path: Path
    settings: EvalSettings
    runtime: RuntimeConfig


def evaluate_one(job: _Job) -> dict:
    """One agent's results table (:func:`~proclab.rl.evaluate.evaluate_agent`, quietly)."""
    return evaluate_agent(job.path, job.settings, job.runtime, Console(quiet=True)).table


def evaluate_agents(
    agents: list[str | Path] | tuple[str | Path, ...],
    settings: EvalSettings = EvalSettings(),
    *,
    runtime: RuntimeConfig | None = None,
    tasks: TaskSettings = TaskSettings(),
    folder: str | Path | None = None,
    progress: bool = True,
) -> Evaluations:
    """Evaluate every agent of ``agents`` (run or checkpoint directories, shipped agents' names, population
    folders) with ``settings`` on ``runtime``, each agent a unit run where ``tasks`` says, and return their rows
    in the agents' order (module docstring). With local workers or Ray and ``runtime``'s torch threads left at 0,
    each agent computes on its share of the cores (:meth:`~proclab.run.tasks.TaskSettings.threads`).
    ``folder``: keep each agent's results there as they arrive, and play only the missing ones on a second call.
    An agent whose evaluation fails does not stop the others; the first failure is raised once they are done."""
    sources = agent_sources(agents)
    tasks.check()
    runtime = runtime or RuntimeConfig()
    runtime = replace(runtime, torch_threads=tasks.unit_threads(runtime.torch_threads))
    fingerprint = _fingerprint(sources, settings, runtime)  # also refuses a missing agent before any plays
    store = Parts(len(sources), None if folder is None else Path(folder), fingerprint, job="evaluation")
    tables = store.run(
        evaluate_one,
        lambda i: _Job(sources[i][1], settings, runtime),
        tasks,
        arrays=_arrays,
        of_arrays=_table,
        title="eval",
        progress=progress,
    )
    return Evaluations(tuple(name for name, _ in sources), tuple(tables))


def _fingerprint(sources: list[tuple[str, Path]], settings: EvalSettings, runtime: RuntimeConfig) -> dict:
    """What the saved evaluations depend on: the settings, the device and precision, and each agent's checkpoint
    (a run's latest: a run trained further is evaluated afresh, in a new folder)."""
    checkpoints = [str(find_checkpoint(path)) for _, path in sources]
    return fingerprint_of(
        asdict(settings),
        (),
        device=runtime.device,
        precision=runtime.precision,
        agents=json.dumps([name for name, _ in sources]),
        checkpoints=json.dumps(checkpoints),
    )


def _arrays(table: dict) -> dict[str, np.ndarray]:
    """An agent's results table as a saved unit holds it: its JSON text (floats written exactly)."""
    return {"table": np.array(json.dumps(table))}


def _table(arrays: dict[str, np.ndarray]) -> dict:
    return json.loads(str(arrays["table"]))
