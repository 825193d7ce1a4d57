"""analyze probe on a tiny maze recording: every probe has its controls with intervals and a headline
margin over the strongest, the random agent is another network of the same shape, every channel of a
conv hook is ranked, and bad fold counts are one line."""

import json

import numpy as np
import pytest

from proclab.cli import main
from proclab.envs import EnvConfig
from proclab.envs.state import glossary, parse_state
from proclab.interpret.probes.targets import StoreTruth
from proclab.models import AgentConfig
from proclab.store import EpisodeStore
from support import TINY_AGENT, agent_checkpoint

THREADS = ["--torch-threads", "1"]


@pytest.fixture(scope="module")
def maze_store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("maze")
    ckpt = agent_checkpoint(
        tmp / "run", AgentConfig(core="none", **TINY_AGENT), EnvConfig(game=("maze",), num_envs=3)
    )
    main(
        [
            "record",
            "--agent",
            str(ckpt),
            "--precision",
            "fp32",
            "--episodes",
            "6",
            "--num-envs",
            "3",
            "--out",
            str(tmp / "DATA"),
            *THREADS,
        ]
    )
    return tmp / "DATA"


@pytest.mark.heavy
def test_probe_reports_controls_and_ranks_channels(tmp_path, maze_store, capsys):
    out = tmp_path / "A"
    main(
        [
            "analyze",
            "probe",
            "--out",
            str(out),
            "--data",
            str(maze_store),
            "--hook",
            "torso.block1.hook_out",
            "--target",
            "agent_x",
            "goal_x",
            "--entity",
            "goal",
            "--folds",
            "3",
            "--bootstrap",
            "100",
            "--permutations",
            "10",
            "--max-steps",
            "800",
        ]
    )
    printed = capsys.readouterr().out
    assert "agent_x (r2)" in printed and "outputs in" in printed and "strongest control" in printed
    summary = json.loads((out / "probe" / "summary.json").read_text())
    assert summary["shape"] == [8, 16, 16]
    for target in ("agent_x", "goal_x"):
        r = summary["probes"][target]
        assert r["kind"] == "ridge"
        controls = ("random_agent", "control_task", "shuffled_labels", "time_baseline", "constant")
        for name in ("probe", *controls):
            lo, hi = r[name]["ci"]
            assert lo <= r[name]["score"] <= hi or np.isclose(lo, hi)
        assert "probe_margin" in r["constant"] and "probe_margin" not in r["probe"]
        h = r["headline"]
        strongest = max(controls, key=lambda name: r[name]["score"])
        assert h["strongest_control"] == strongest
        assert np.isclose(h["margin"], r["probe"]["score"] - r[strongest]["score"])
        assert h["level"] == pytest.approx(1 - 0.05 / 2)  # Bonferroni over the two targets
        assert r["probe"]["score"] != r["random_agent"]["score"]  # a different network
    tracking = summary["tracking"]["goal"]
    for name in ("agent", "random_agent"):
        channels = [c["channel"] for c in tracking[name]["channels"]]
        assert sorted(channels) == list(range(8))
    assert not (out / "probe" / "random_agent").exists()  # the random agent is made in memory


def test_unknown_target_is_one_line(tmp_path, maze_store, capsys):
    with pytest.raises(SystemExit) as e:
        main(
            [
                "analyze",
                "probe",
                "--out",
                str(tmp_path / "B"),
                "--data",
                str(maze_store),
                "--target",
                "cheese_x",
            ]
        )
    assert e.value.code == 2 and "goal_x" in capsys.readouterr().err


@pytest.mark.parametrize("folds", ["1", "0", "-3"])
def test_fewer_than_two_folds_is_one_line(tmp_path, maze_store, capsys, folds):
    with pytest.raises(SystemExit) as e:
        main(["analyze", "probe", "--out", str(tmp_path / "C"), "--data", str(maze_store),
              "--target", "agent_x", "--folds", folds])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and "--folds must be >= 2" in err and "Traceback" not in err
    assert len(err.splitlines()) == 1


def test_the_corner_of_a_recorded_maze_is_where_a_loop_over_its_first_state_finds_it(maze_store):
    """On a store: the top-right cell (by hand: the highest open column and row of each episode's first
    state, to the cell's centre) at every step."""
    store = EpisodeStore(maze_store)
    truth = StoreTruth(store, np.arange(store.num_episodes))
    corner = truth.world_positions("corner")
    start = 0
    for j, n in enumerate(truth.lengths):
        state = parse_state(truth.first_state(j))
        rows, cols = np.nonzero(state.grid != glossary("maze").type_of("wall"))
        np.testing.assert_allclose(corner[0][start : start + n], cols.max() + 0.5, atol=1e-5)
        np.testing.assert_allclose(corner[1][start : start + n], rows.max() + 0.5, atol=1e-5)
        start += n


@pytest.mark.slow
def test_analyze_probe_probes_and_tracks_the_corner(tmp_path, maze_store):
    """The corner's offset probed and its cell tracked, with the random agent's best channel beside."""
    out = tmp_path / "C"
    main(["analyze", "probe", "--out", str(out), "--data", str(maze_store), "--hook", "torso.block1.hook_out",
          "--target", "corner_dx", "--entity", "corner", "--controls", "random_agent", "--folds", "3",
          "--bootstrap", "20", "--permutations", "5", "--max-steps", "100000", *THREADS])  # fmt: skip
    summary = json.loads((out / "probe" / "summary.json").read_text())
    assert set(summary["probes"]["corner_dx"]["per_episode"]) == {"episodes", "probe", "random_agent"}
    best = summary["tracking"]["corner"]["agent"]["best_vs_random_agent"]
    assert best["ci"][0] <= best["margin"] <= best["ci"][1] or np.isclose(*best["ci"])
