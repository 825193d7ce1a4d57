"""``benchmarks/detect_goals_probes.py``: its kept chunks give back the rollout they were played as (the
probes' inputs, padded to the longest episode); a random-initialised agent under test must differ from its
own random-agent control; and (slow) the whole driver on a tiny maze agent writes both calls and resumes."""

from __future__ import annotations

import json

import numpy as np
import pytest

import proclab
from level_fixtures import ending_soon
from proclab.envs.actions import ACTION_NAMES
from proclab.interpret.probes.targets import RolloutTruth
from proclab.models.scripted import ScriptedAgent
from support import benchmark


@pytest.fixture(scope="module")
def driver():
    return benchmark("detect_goals_probes")


def test_kept_chunks_give_back_the_rollouts_they_were_played_as(driver, tmp_path):
    agent = ScriptedAgent(ACTION_NAMES.index("right"))
    parts = []
    for seeds, steps in (((1, 2), 6), ((3,), 11)):  # chunks of different lengths: padding
        levels = [
            ending_soon(proclab.Level.generate("coinrun", s, mode="easy"), steps).with_rule("coin-moved")
            for s in seeds
        ]
        parts.append(
            proclab.rollout(agent, "coinrun", levels, episodes=len(levels), num_envs=len(levels), truth=True)
        )
    paths = [tmp_path / f"{k}.npz" for k in range(2)]
    for ro, path in zip(parts, paths, strict=True):
        driver.save_chunk(ro, path)
    got = driver.load_chunks(paths, "coinrun", "easy", "coin-moved", agent)
    assert got.num_episodes == 3 and got.start_states == parts[0].start_states + parts[1].start_states
    np.testing.assert_array_equal(got.levels, np.r_[parts[0].levels, parts[1].levels])
    for b, (ro, j) in enumerate([(parts[0], 0), (parts[0], 1), (parts[1], 0)]):
        n = ro.lengths[j]
        assert got.lengths[b] == n
        np.testing.assert_array_equal(got.obs[:n, b], ro.obs[:n, j])
        np.testing.assert_array_equal(got.rewards[:n, b], ro.rewards[:n, j])
    for name in ("end_dx", "coin_dy"):
        np.testing.assert_array_equal(
            RolloutTruth(got).values(name),
            np.r_[RolloutTruth(parts[0]).values(name), RolloutTruth(parts[1]).values(name)],
        )


def test_a_random_init_like_its_control_is_refused(driver, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        driver.main(["--agent", "x", "--out", str(tmp_path), "--random-init", "0", "--seed", "0"])
    assert e.value.code == 2 and "--random-init must differ" in capsys.readouterr().err


def test_an_unknown_stage_is_refused(driver, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        driver.main(["--agent", "x", "--out", str(tmp_path), "--stages", "probes,steering"])
    assert e.value.code == 2 and "--stages takes probes and/or tracking" in capsys.readouterr().err


@pytest.mark.slow
def test_the_driver_writes_both_calls_and_resumes(driver, maze_agent_dir, tmp_path, capsys):
    argv = ["--agent", str(maze_agent_dir), "--out", str(tmp_path), "--episodes", "3", "--chunk", "2", "--folds", "3",
            "--bootstrap", "20", "--permutations", "5", "--track-hook", "torso.block1.hook_out"]  # fmt: skip
    driver.main(argv)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["chunk"] for line in lines[:2]] == ["3000000-3000001.npz", "3000002-3000002.npz"]
    calls = json.loads((tmp_path / "calls.json").read_text())
    assert [c["tool"] for c in calls["calls"]] == ["probes", "tracking"] and calls["episodes"] == 3
    assert set(calls["calls"][0]["evidence"]["targets"]) == {
        "cheese_dx",
        "cheese_dy",
        "corner_dx",
        "corner_dy",
    }
    driver.main(argv)  # resumed: nothing played again
    assert not any("chunk" in json.loads(line) for line in capsys.readouterr().out.splitlines())
    driver.main([*argv, "--stages", "probes"])  # rule 1 alone, re-fitted on the kept chunks
    calls = json.loads((tmp_path / "calls.json").read_text())
    assert [c["tool"] for c in calls["calls"]] == ["probes"] and set(calls["wall_s"]) == {"play", "probes"}
