"""``analyze sweep --parts N`` spread over local processes (``--workers``) and over a Ray cluster of two nodes on
this machine (``--ray``, the ``ray_cluster`` fixture): the same outputs, bit for bit, as the sweep played in one
process, and a worker killed mid-block (kill -9) costs that block's re-run and nothing else."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from proclab.cli import main
from support import ray_tasks

pytestmark = pytest.mark.distributed

SMALL = ["--n-ics", "4", "--clusters", "4", "--nmf", "3", "--perplexity", "10", "--fit-points", "120"]
SWEEP = ["--levels", "24", "--arms", "mean,p05,p95", "--directions", "0:4", "--permutations", "200",
         "--bootstrap", "100", "--rows", "16", "--torch-threads", "1", "--precision", "fp32", "--landing", "20",
         "--seed", "3"]  # fmt: skip
TIMING = ("seconds", "play_seconds", "steps_per_second")
"""The only numbers of sweep.json that depend on where and when the blocks were played."""


def sweep(folder: Path, *args: str) -> tuple[dict, dict[str, np.ndarray]]:
    """``analyze sweep`` on ``folder`` (in this process), its outputs read and then moved out of the way, so
    that the next sweep of the same folder starts afresh (same paths in every sweep.json)."""
    main(["analyze", "sweep", "--out", str(folder), *SWEEP, *args])
    return outputs(folder)


def outputs(folder: Path) -> tuple[dict, dict[str, np.ndarray]]:
    summary = json.loads((folder / "sweep" / "sweep.json").read_text())
    with np.load(folder / "sweep" / "episodes.npz") as f:
        arrays = dict(f)
    shutil.rmtree(folder / "sweep")
    shutil.rmtree(folder / "sweep-parts", ignore_errors=True)
    return {k: v for k, v in summary.items() if k not in TIMING}, arrays


def same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def analysis(gru_store, tmp_path_factory, monkeypatch_module):
    """A basis of a tiny GRU agent's states, and the sweep of it in one process: in one part and in four."""
    monkeypatch_module.delenv("RAY_ADDRESS", raising=False)
    out = tmp_path_factory.mktemp("analysis") / "A"
    main(["analyze", "hidden", "--data", str(gru_store), "--out", str(out), *SMALL, "--no-plots",
          "--torch-threads", "1"])  # fmt: skip
    return out, sweep(out), sweep(out, "--parts", "4")


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_four_parts_in_one_process_play_the_outcomes_of_one_part(analysis):
    _, (_, whole), (_, parts) = analysis
    assert same_arrays(whole, parts)


def test_parts_in_local_processes_equal_the_one_process_sweep(analysis):
    folder, _, (summary, arrays) = analysis
    spread, spread_arrays = sweep(folder, "--parts", "4", "--workers", "2")
    assert spread == summary and same_arrays(spread_arrays, arrays)


def play_part_tasks(cluster, seen: set | None = None) -> list:
    """Every attempt of a ``play_part`` task the cluster has seen, but those of the tasks ``seen``."""
    return ray_tasks(cluster, "play_part", seen)


def test_parts_on_a_two_node_cluster_equal_the_one_process_sweep(analysis, ray_cluster):
    folder, _, (summary, arrays) = analysis
    before = {t.task_id for t in play_part_tasks(ray_cluster)}
    spread, spread_arrays = sweep(folder, "--parts", "4", "--ray", ray_cluster.address)
    assert spread == summary and same_arrays(spread_arrays, arrays)
    ran = play_part_tasks(ray_cluster, before)
    assert len(ran) == 4 and {t.state for t in ran} == {"FINISHED"}
    assert len({t.node_id for t in ran}) == 2  # both nodes played blocks


def test_a_worker_killed_mid_block_costs_that_block_alone(analysis, ray_cluster):
    folder, _, (summary, arrays) = analysis
    before = {t.task_id for t in play_part_tasks(ray_cluster)}
    command = [sys.executable, "-m", "proclab", "analyze", "sweep", "--out", str(folder), *SWEEP,
               "--parts", "4", "--ray", ray_cluster.address]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    driver = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    killed, deadline = None, time.monotonic() + 120
    while killed is None and driver.poll() is None and time.monotonic() < deadline:
        playing = ray_cluster.running("play_part")
        if playing:
            killed = playing[0].pid
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.05)
    saved_when_killed = len(list((folder / "sweep-parts").glob("part-*.npz")))
    _, err = driver.communicate(timeout=300)
    assert driver.returncode == 0, err[-2000:]
    assert killed is not None and saved_when_killed < 4  # killed while a block was still being played
    # Ray ran the killed block's task again (a second attempt), and no other task twice
    attempts = sorted((t.task_id, t.attempt_number, t.state) for t in play_part_tasks(ray_cluster, before))
    assert len({a[0] for a in attempts}) == 4 and len(attempts) == 5
    assert [a[1:] for a in attempts if a[1] > 0] == [(1, "FINISHED")]
    spread, spread_arrays = outputs(folder)
    # every level played once: the merged outcomes and every statistic are those of the one-process sweep
    assert spread == summary and same_arrays(spread_arrays, arrays)


def test_a_driver_killed_mid_run_resumes_from_the_blocks_it_saved(analysis):
    """kill -9 of the whole command (driver and its worker processes) once some blocks are saved: the same
    command again plays only the missing blocks (the saved ones are not rewritten) and ends with the outputs of
    the one-process sweep."""
    folder, _, (summary, arrays) = analysis
    command = [sys.executable, "-m", "proclab", "analyze", "sweep", "--out", str(folder), *SWEEP,
               "--parts", "4", "--workers", "2"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    driver = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)  # fmt: skip
    parts = folder / "sweep-parts"
    deadline = time.monotonic() + 300
    while driver.poll() is None and time.monotonic() < deadline and not list(parts.glob("part-*.npz")):
        time.sleep(0.02)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    saved = {p.name: p.stat().st_mtime_ns for p in parts.glob("part-*.npz")}
    assert 1 <= len(saved) < 4, f"killed with {len(saved)} of 4 blocks saved"
    assert not (folder / "sweep" / "sweep.json").exists()
    main(["analyze", "sweep", "--out", str(folder), *SWEEP, "--parts", "4", "--workers", "2"])
    assert {name: (parts / name).stat().st_mtime_ns for name in saved} == saved  # not played again
    resumed, resumed_arrays = outputs(folder)
    assert resumed == summary and same_arrays(resumed_arrays, arrays)
