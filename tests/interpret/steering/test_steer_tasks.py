"""``analyze steer --parts N`` played in blocks: in local processes (``--workers``) and on a Ray cluster of two
nodes on this machine (``--ray``, the ``ray_cluster`` fixture), the same summary and vector, bit for bit, as the
steering in one process; a second run plays no block already saved, and blocks of another steering are refused."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from proclab.cli import main
from proclab.envs import EnvConfig
from proclab.models import AgentConfig
from support import TINY_AGENT, agent_checkpoint, ray_tasks_run

STEER = ["--levels", "2", "--split", "1084:2", "--vector-levels", "0:2", "--coefficients", "0,300", "--controls", "1", "--rows", "8",
         "--no-greedy", "--bootstrap", "50", "--torch-threads", "1", "--precision", "fp32"]  # fmt: skip
"""A tiny maze agent's steering on two held-out levels: the plain agent, the vector, its instance control and
one random draw, and the plain agent's walk without the cheese; actions sampled (with torch's initialisation of the
heads, the logits are large enough) so that the arms walk apart, on two levels whose cheese lies near the start."""


def steered(folder: Path, agent: Path, *args: str) -> tuple[dict, np.ndarray]:
    """``analyze steer`` on ``folder`` (in this process): its summary without the timing, and the vector; the
    outputs are moved out of the way so that the next steering of the folder starts afresh."""
    main(["analyze", "steer", "--out", str(folder), "--agent", str(agent), *STEER, *args])
    summary = json.loads((folder / "steer" / "summary.json").read_text())
    vector = torch.load(folder / "steer" / "vector.pt", weights_only=True).numpy()
    shutil.rmtree(folder / "steer")
    summary.pop("seconds")
    return summary, vector


@pytest.fixture(scope="module")
def steering(tmp_path_factory, monkeypatch_module):
    """A tiny maze agent and its steering in one process, in one block."""
    monkeypatch_module.delenv("RAY_ADDRESS", raising=False)
    tmp = tmp_path_factory.mktemp("steer")
    agent = agent_checkpoint(
        tmp / "run",
        AgentConfig(core="none", head_init="torch", **TINY_AGENT),
        EnvConfig(game=("maze",), num_envs=2),
    )
    folder = tmp / "A"
    return folder, agent, steered(folder, agent)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.mark.heavy  # make test-heavy: spawned processes (or a second sweep) of ten seconds and more
def test_blocks_in_local_processes_equal_the_one_process_steering(steering, capsys):
    folder, agent, (summary, vector) = steering
    spread, spread_vector = steered(folder, agent, "--parts", "2", "--workers", "2")
    assert spread == summary and np.array_equal(spread_vector, vector)
    walks = summary["paths"]["300"]
    assert (
        walks["vector"] != walks["random"]
    )  # the arms walked apart: the equality above is not that of idle agents
    blocks = sorted((folder / "steer-parts").glob("part-*.npz"))
    assert len(blocks) == 2
    # the same command again plays no block (each is saved), and reports the same numbers
    saved = {p: p.stat().st_mtime_ns for p in blocks}
    again, _ = steered(folder, agent, "--parts", "2")
    assert again == summary and {p: p.stat().st_mtime_ns for p in blocks} == saved
    # blocks of another steering (another seed) are refused in one line
    capsys.readouterr()
    with pytest.raises(SystemExit):
        steered(folder, agent, "--parts", "2", "--seed", "1")
    assert "holds the parts of another steering (seed differ)" in capsys.readouterr().err
    shutil.rmtree(folder / "steer-parts")


@pytest.mark.distributed
def test_blocks_on_a_two_node_cluster_equal_the_one_process_steering(steering, ray_cluster):
    folder, agent, (summary, vector) = steering
    with ray_tasks_run(ray_cluster, "play_block", 2, nodes=2):  # both nodes played a block
        spread, spread_vector = steered(folder, agent, "--parts", "2", "--ray", ray_cluster.address)
    assert spread == summary and np.array_equal(spread_vector, vector)
    shutil.rmtree(folder / "steer-parts")
