"""The goal benchmark's tools on many agents as one call: each agent's calls are those of its tools played on it
alone, in the agents' order, each followed by its random-initialised control's; in local processes the same; saved
in a folder, a second call plays no agent again."""

import dataclasses

import pytest

import proclab
from proclab.envs import EnvConfig
from proclab.errors import ProclabError
from proclab.interpret.goals.benchmark import BenchmarkSettings, calls_of, goal_calls_of_agents
from proclab.interpret.probes.probe import random_agent
from proclab.interpret.steering.steer import SteerSettings
from proclab.models import AgentConfig
from proclab.run.tasks import TaskSettings
from support import TINY_AGENT, agent_checkpoint

SETTINGS = BenchmarkSettings(
    tools=("steering",),
    steering_hook="torso.hook_fc",
    steer=SteerSettings(
        levels=2, split="3000000:1000", vector_levels="0:2", coefficients=(-1.0, 0.0), controls=2, rows=8,
        greedy=False, bootstrap=20,
    ),
)  # fmt: skip


@pytest.fixture(scope="module")
def benchmarked(tmp_path_factory):
    """Two tiny CoinRun agents (feed-forward, two widths), their calls and their controls' in this process."""
    tmp = tmp_path_factory.mktemp("agents")
    env = EnvConfig(game=("coinrun",), num_envs=2)
    paths = [
        agent_checkpoint(tmp / "a", AgentConfig(core="none", **TINY_AGENT), env),
        agent_checkpoint(tmp / "b", AgentConfig(core="none", widths=(8, 8, 8), fc=16), env),
    ]
    return paths, goal_calls_of_agents(paths, settings=SETTINGS, progress=False)


@pytest.mark.heavy  # make test-heavy: two agents and their controls steered (about 40 s)
def test_each_agent_and_its_control_are_called_as_alone_in_order(benchmarked):
    paths, calls = benchmarked
    names = [str(p) for p in paths]
    assert [c.agent for c in calls] == [
        names[0],
        f"{names[0]} (random init)",
        names[1],
        f"{names[1]} (random init)",
    ]
    assert {c.tool for c in calls} == {"steering"} and all(c.evidence["rules_version"] == 2 for c in calls)
    control = random_agent(proclab.load(paths[1], "cpu"), seed=SETTINGS.seed)
    assert calls_of(control, f"{names[1]} (random init)", SETTINGS, progress=False) == [calls[3]]


@pytest.mark.heavy
def test_agents_in_local_processes_are_called_the_same_and_saved_once(benchmarked, tmp_path):
    paths, calls = benchmarked
    folder = tmp_path / "bench"
    spread = goal_calls_of_agents(
        paths[:1], settings=SETTINGS, tasks=TaskSettings(workers=2), folder=folder, progress=False
    )
    assert spread == calls[:2]  # the agent and its control, each in a process of its own
    saved = {p: p.stat().st_mtime_ns for p in folder.glob("part-*.npz")}
    assert len(saved) == 2
    assert goal_calls_of_agents(paths[:1], settings=SETTINGS, folder=folder, progress=False) == calls[:2]
    assert {p: p.stat().st_mtime_ns for p in folder.glob("part-*.npz")} == saved
    with pytest.raises(ProclabError, match="another goal benchmark"):
        goal_calls_of_agents(
            paths, settings=dataclasses.replace(SETTINGS, seed=1), folder=folder, progress=False
        )


def test_an_unknown_tool_is_one_line():
    with pytest.raises(ProclabError, match="benchmark tool"):
        goal_calls_of_agents(["coinrun/small"], settings=BenchmarkSettings(tools=("probes",)), progress=False)
