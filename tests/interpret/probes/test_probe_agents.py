"""Probes of many agents as one call: each agent's probes are those of its own rollout probed alone, in the agents'
order; in local processes (``workers``) and on a Ray cluster of two nodes on this machine (``ray_cluster``) the
same, bit for bit; saved in a folder, a second call probes no agent again."""

import pytest

import proclab
from proclab.envs import EnvConfig
from proclab.interpret.probes.agents import ProbeAgentsSettings, ProbesByAgent, probe_agents
from proclab.models import AgentConfig
from proclab.run.tasks import TaskSettings
from support import TINY_AGENT, agent_checkpoint, ray_tasks_run

HOOK = "torso.hook_fc"
SETTINGS = ProbeAgentsSettings(
    targets=("agent_x",), folds=2, bootstrap=20, levels="test1", episodes=4, num_envs=4, threads=1
)


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """Two tiny maze agents (feed-forward, of two widths) and their probes in this process, agent after agent."""
    tmp = tmp_path_factory.mktemp("agents")
    env = EnvConfig(game=("maze",), num_envs=2)
    paths = [
        agent_checkpoint(tmp / "a", AgentConfig(core="none", **TINY_AGENT), env),
        agent_checkpoint(tmp / "b", AgentConfig(core="none", widths=(8, 8, 8), fc=16), env),
    ]
    return paths, probe_agents(paths, HOOK, settings=SETTINGS, progress=False)


@pytest.mark.heavy  # make test-heavy: two agents played and probed, then one again alone
def test_each_agent_is_probed_on_its_own_rollout(probed):
    paths, result = probed
    assert result.agents == tuple(map(str, paths)) and len(result.probes) == 2
    agent = proclab.load(paths[1], "cpu")
    ro = proclab.rollout(agent, levels="test1", episodes=4, num_envs=4, seed=0, cache=[HOOK], truth=True)
    alone = proclab.analyze.probe(ro, HOOK, settings=SETTINGS.probe_settings(), progress=False)
    assert alone.to_dict() == result.probes[1].to_dict()
    rows = result.table()
    assert [r["agent"] for r in rows] == [str(p) for p in paths for _ in result.probes[0].table()]


@pytest.mark.heavy  # make test-heavy: spawned processes (or a second sweep) of ten seconds and more
def test_agents_in_local_processes_equal_the_one_process_probes(probed, tmp_path):
    paths, result = probed
    folder = tmp_path / "probes"
    spread = probe_agents(
        paths, HOOK, settings=SETTINGS, tasks=TaskSettings(workers=2), folder=folder, progress=False
    )
    assert spread.to_dict() == result.to_dict()
    saved = {p: p.stat().st_mtime_ns for p in folder.glob("part-*.npz")}
    assert len(saved) == 2
    again = probe_agents(
        paths, HOOK, settings=SETTINGS, folder=folder, progress=False
    )  # read back, none probed
    assert isinstance(again, ProbesByAgent) and again.to_dict() == result.to_dict()
    assert {p: p.stat().st_mtime_ns for p in folder.glob("part-*.npz")} == saved


@pytest.mark.distributed
def test_agents_on_a_two_node_cluster_equal_the_one_process_probes(probed, ray_cluster):
    paths, result = probed
    tasks = TaskSettings(ray_address=ray_cluster.address)
    with ray_tasks_run(ray_cluster, "probe_one", 2):
        spread = probe_agents(paths, HOOK, settings=SETTINGS, tasks=tasks, progress=False)
    assert spread.to_dict() == result.to_dict()
