"""Many agents evaluated as one call: each agent's rows are those of its evaluation alone, in the agents' order; in
local processes (``workers``) and on a Ray cluster of two nodes on this machine (``ray_cluster``) the same, bit
for bit; a population folder stands for its members; ``proclab eval --agents`` writes the table and resumes."""

import csv
import json

import pytest
from rich.console import Console

from proclab.cli import main
from proclab.envs import EnvConfig
from proclab.errors import ProclabError
from proclab.models import AgentConfig
from proclab.rl.evaluate import EvalSettings, evaluate_agent
from proclab.rl.evaluations import evaluate_agents
from proclab.rl.population import CSV, agent_sources
from proclab.run.runtime import RuntimeConfig
from proclab.run.tasks import TaskSettings
from support import TINY_AGENT, TINY_GRU, agent_checkpoint, make_agent_checkpoint, ray_tasks_run

SETTINGS = EvalSettings(episodes=2, envs_per_game=2)
"""Two episodes on the training levels and two on held-out ones, actions sampled."""
RUNTIME = RuntimeConfig(device="cpu", precision="fp32", torch_threads=1)
FLAGS = [
    "--episodes",
    "2",
    "--envs-per-game",
    "2",
    "--device",
    "cpu",
    "--precision",
    "fp32",
    "--torch-threads",
    "1",
]


@pytest.fixture(scope="module")
def agents(tmp_path_factory):
    """Two tiny bossfight agents (a feed-forward one and a GRU) and their evaluation in this process, agent after
    agent."""
    tmp = tmp_path_factory.mktemp("agents")
    feed_forward = agent_checkpoint(
        tmp / "ff", AgentConfig(core="none", **TINY_AGENT), EnvConfig(game=("bossfight",), num_envs=2)
    )
    gru = make_agent_checkpoint(tmp / "gru", TINY_GRU, "bossfight")
    return [feed_forward, gru], evaluate_agents(
        [feed_forward, gru], SETTINGS, runtime=RUNTIME, progress=False
    )


def test_each_agent_has_the_rows_of_its_evaluation_alone(agents):
    paths, evaluations = agents
    assert evaluations.agents == tuple(map(str, paths))
    for path, table in zip(paths, evaluations.tables, strict=True):
        assert table == evaluate_agent(path, SETTINGS, RUNTIME, Console(quiet=True)).table
    rows = evaluations.table()
    assert [(r["agent"], r["split"]) for r in rows] == [
        (str(p), split) for p in paths for split in ("train", "test1")
    ]
    assert rows[0]["return_mean"] == evaluations.tables[0]["rows"][0]["return_mean"]


@pytest.mark.heavy  # make test-heavy: spawned processes (or a second sweep) of ten seconds and more
def test_agents_in_local_processes_equal_the_one_process_evaluation(agents):
    paths, evaluations = agents
    spread = evaluate_agents(paths, SETTINGS, runtime=RUNTIME, tasks=TaskSettings(workers=2), progress=False)
    assert spread == evaluations


def test_a_population_folder_stands_for_its_members_that_trained(agents, tmp_path):
    paths, _ = agents
    with (tmp_path / CSV).open("w", newline="") as f:
        writer = csv.DictWriter(f, ["member", "run_dir", "error"])
        writer.writeheader()
        writer.writerow({"member": "b", "run_dir": str(paths[1]), "error": ""})
        writer.writerow({"member": "broken", "run_dir": str(paths[0]), "error": "ValueError: nan"})
        writer.writerow({"member": "a", "run_dir": str(paths[0]), "error": ""})
    assert agent_sources([tmp_path]) == [("b", paths[1]), ("a", paths[0])]
    # a run the table names relative to where the population trained is found under the folder itself
    relative = tmp_path / "pop"
    run = relative / "ppo" / "bossfight" / "m" / "1-2026"
    run.mkdir(parents=True)
    (relative / CSV).write_text("member,run_dir,error\nm,elsewhere/pop/ppo/bossfight/m/1-2026,\n")
    assert agent_sources([relative]) == [("m", run)]
    with pytest.raises(ProclabError, match="agents given twice: b"):
        agent_sources([tmp_path, "b"])
    with pytest.raises(ProclabError, match="does not exist"):
        evaluate_agents([tmp_path / "nowhere"], SETTINGS, runtime=RUNTIME, progress=False)


def test_the_command_writes_the_table_and_a_second_run_plays_no_agent_again(agents, tmp_path, capsys):
    paths, evaluations = agents
    out = tmp_path / "evals.json"
    main(["eval", "--agents", *map(str, paths), *FLAGS, "--out", str(out)])
    assert json.loads(out.read_text()) == evaluations.to_dict()
    with out.with_suffix(".csv").open(newline="") as f:
        assert [r["agent"] for r in csv.DictReader(f)] == [r["agent"] for r in evaluations.table()]
    parts = sorted((tmp_path / "evals-parts").glob("part-*.npz"))
    saved = {p: p.stat().st_mtime_ns for p in parts}
    assert len(saved) == 2
    assert "results written to" in capsys.readouterr().out
    main(["eval", "--agents", *map(str, paths), *FLAGS, "--out", str(out), "--json"])
    assert json.loads(capsys.readouterr().out) == json.loads(out.read_text())
    assert {p: p.stat().st_mtime_ns for p in parts} == saved  # read back, not played again


def test_agent_and_agents_exclude_each_other(agents, capsys):
    paths, _ = agents
    with pytest.raises(SystemExit):
        main(["eval", "--agent", str(paths[0]), "--agents", str(paths[1])])
    assert "--agent and --agents exclude each other" in capsys.readouterr().err


@pytest.mark.distributed
def test_agents_on_a_two_node_cluster_equal_the_one_process_evaluation(agents, ray_cluster):
    paths, evaluations = agents
    tasks = TaskSettings(ray_address=ray_cluster.address)
    with ray_tasks_run(ray_cluster, "evaluate_one", 2):
        assert evaluate_agents(paths, SETTINGS, runtime=RUNTIME, tasks=tasks, progress=False) == evaluations
