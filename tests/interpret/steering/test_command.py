"""analyze steer on a tiny maze agent: the per-level vectors and their controls, coefficient 0 is the plain
agent (checked against an independent replay), retargeting against random channel sets, and one-line
errors for a hook or channels the agent lacks and for a game whose camera follows the agent."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from proclab.cli import main
from proclab.envs import EnvConfig
from proclab.models import AgentConfig
from support import TINY_AGENT, agent_checkpoint


@pytest.fixture(scope="module")
def maze_agent(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("maze")
    return agent_checkpoint(
        tmp / "run", AgentConfig(core="none", **TINY_AGENT), EnvConfig(game=("maze",), num_envs=2)
    )


def steer_cli(out, agent, *extra):
    main(["analyze", "steer", "--out", str(out), "--agent", str(agent), "--torch-threads", "1", *extra])


@pytest.mark.heavy
def test_steer_builds_the_vector_and_pairs_every_coefficient(tmp_path, maze_agent, capsys):
    out = tmp_path / "S"
    steer_cli(
        out, maze_agent, "--levels", "2", "--vector-levels", "0:3", "--coefficients", "0,3", "--channels", "0",
        "1", "--rows", "4", "--magnitude", "3", "--bootstrap", "100", "--controls", "1", "--channel-controls",
        "2",
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert "retargeting: reached the target" in printed and "vector: each held-out level's own" in printed
    summary = json.loads((out / "steer" / "summary.json").read_text())
    assert summary["entity"] == "cheese" and summary["vector"]["pairs"] == 3
    assert summary["vector"]["kind"] == "per-level" and summary["vector"]["levels_with_entity"] == 2
    vector = torch.load(out / "steer" / "vector.pt", weights_only=True)
    assert tuple(vector.shape) == (8, 16, 16) and summary["vector"]["norm"] > 0
    zero = summary["coefficients"]["0"]
    assert all(zero[k]["change"] == 0 for k in ("return", "length"))
    assert zero["level_complete"]["lost"] == zero["level_complete"]["gained"] == 0
    assert set(summary["coefficients"]) == {"0", "3"}
    three = summary["coefficients"]["3"]
    r = summary["retarget"]
    tests = [three["level_complete"], *three["reach"].values(), r["tracking_vs_plain"]]
    tests.append(r["random_sets"]["tracking_vs_random"])
    for by_outcome in summary["controls"].values():
        for e in by_outcome.values():
            tests += [e["instance_vs_plain"], e["vector_vs_instance"], e["random"]["vector_vs_random"]]
            assert e["random"]["draws"] == 1 and len(e["random"]["changes"]) == 1
    assert all(t["correction"] == f"holm over {len(tests)}" for t in tests)  # one family: all of them
    assert {"levels", "plain_with_entity", "3"} <= set(summary["paths"])
    r = summary["retarget"]
    assert r["channels"]["tracking"] == [0, 1] and len(r["channels"]["random_sets"]) == 2
    assert all(not set(c) & {0, 1} for c in r["channels"]["random_sets"])
    assert len(r["random_sets"]["changes"]) == 2


def independent_plain_play(agent, env_config, states):
    """Each state played greedily by the plain agent in a one-slot env, the cheese found with the full
    parse at every step: (level completed, came within half a unit of the cheese's cell or completed)."""
    from proclab.envs import ProcgenVecEnv
    from proclab.envs.state import parse_state, positions

    env = ProcgenVecEnv(dataclasses.replace(env_config, num_envs=1), seed=0)
    env.reset()
    completed, reached = [], []
    for data in states:
        env.set_slot_state(0, data)
        obs, hidden, first, near = (
            env.observe(),
            agent.initial_state(1),
            torch.ones(1, dtype=torch.bool),
            False,
        )
        while True:
            with torch.no_grad():
                out, hidden = agent.step(torch.as_tensor(obs), hidden, first, torch.zeros(1))
            obs, _, terminated, truncated, info = env.step(out.logits.argmax(1).numpy())
            first = torch.zeros(1, dtype=torch.bool)
            if terminated[0] or truncated[0]:
                done = bool(info["episode"]["level_complete"][0])
                break
            state = parse_state(env.slot_states()[0])
            me = state.agent
            for cx, cy in positions(state, "cheese"):
                near |= max(abs(cx - me.x) - me.rx - 0.5, abs(cy - me.y) - me.ry - 0.5) <= 0.5
        completed.append(done)
        reached.append(near or done)
    env.close()
    return np.array(completed), np.array(reached)


def test_plain_completion_and_cheese_reach_match_an_independent_replay(tmp_path, maze_agent):
    """Coefficient 0 is the plain agent: its level completion and per-kind reach of the cheese must be
    what a plain greedy loop over the same states finds with the full parse. One level has the mouse
    moved next to the cheese, so reach is 1 there however the episode ends: an implementation that
    counted reach by completion alone, or scanned the wrong slot or step, disagrees."""
    from proclab.envs.state import glossary, move_agent, parse_state, positions, serialize_state
    from proclab.levels.file import LevelState, level_states, write_level_states
    from proclab.levels.level import generate_level
    from proclab.models.loading import load_agent
    from proclab.run.runtime import make_runtime

    plain = [generate_level("maze", "easy", s) for s in (3, 8)]
    state = parse_state(plain[0].data)
    cx, cy = positions(state, "cheese")[0]
    wall = glossary("maze").type_of("wall")
    h, w = state.grid.shape
    free = [
        (cx + dx, cy + dy)
        for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1))
        if 0 <= cx + dx < w and 0 <= cy + dy < h and state.grid[int(cy + dy), int(cx + dx)] != wall
    ]
    moved = LevelState(serialize_state(move_agent(state, free[0])), 3, "next to the cheese")
    states = [*plain, moved]
    file = write_level_states(tmp_path / "mazes.json", level_states("maze", "easy", states))
    out = tmp_path / "S"
    steer_cli(
        out, maze_agent, "--levels-from", str(file), "--vector-levels", "0:2", "--coefficients", "0", "--rows",
        "4", "--bootstrap", "50", "--precision", "fp32",
    )  # fmt: skip
    summary = json.loads((out / "steer" / "summary.json").read_text())
    agent, env_config, _ = load_agent(maze_agent, make_runtime("cpu", "fp32"))
    from proclab.interpret.interventions.batched_play import ProcgenLevels
    from proclab.levels.file import read_level_states

    levels = ProcgenLevels(env_config, 1, 0, read_level_states(file))
    completed, reached = independent_plain_play(agent, env_config, [levels.level_state(i) for i in range(3)])
    levels.close()
    zero = summary["coefficients"]["0"]
    assert reached[2]  # the moved level: next to the cheese from the first step
    assert zero["level_complete"]["intervened"] == pytest.approx(completed.mean())
    assert zero["reach"]["cheese"]["intervened"] == pytest.approx(reached.mean())
    assert zero["reach"]["cheese"]["levels"] == 3


def test_coefficients_must_include_zero(tmp_path, maze_agent, capsys):
    with pytest.raises(SystemExit) as e:
        main(
            [
                "analyze",
                "steer",
                "--out",
                str(tmp_path / "T"),
                "--agent",
                str(maze_agent),
                "--coefficients",
                "1,2",
            ]
        )
    assert e.value.code == 2 and "must include 0" in capsys.readouterr().err


@pytest.mark.slow  # make test-all: 10 s; level files are played by the sweep's default test
def test_steer_levels_from_plays_the_files_states_as_the_held_out_levels(tmp_path, maze_agent):
    """``--levels-from``: the file's states are the held-out levels (one each per coefficient, --levels
    unused), the vector still comes from --vector-levels, and the summary names the file."""
    from proclab.levels.file import level_states, write_level_states
    from proclab.levels.level import generate_level

    file = write_level_states(
        tmp_path / "mazes.json",
        level_states("maze", "easy", [generate_level("maze", "easy", s) for s in (3, 8, 11)]),
    )
    out = tmp_path / "S"
    main(
        ["analyze", "steer", "--out", str(out), "--agent", str(maze_agent), "--levels", "50",
         "--levels-from", str(file), "--vector-levels", "0:2", "--coefficients", "0,1", "--rows", "4",
         "--bootstrap", "50", "--torch-threads", "1", "--controls", "0"]
    )  # fmt: skip
    summary = json.loads((out / "steer" / "summary.json").read_text())
    assert summary["levels_from"] == str(file) and summary["vector"]["pairs"] == 2
    assert summary["levels"] == 3 and set(summary["coefficients"]) == {"0", "1"}


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--hook", "no.such.hook"], "unknown hook 'no.such.hook'"),
        (["--channels", "999"], "--channels 999: torso.block1.hook_out has channels 0-7"),
        (["--hook", "torso.hook_fc", "--channels", "1"], "--channels needs a conv map"),
    ],
)
def test_bad_hook_or_channels_give_one_line(tmp_path, maze_agent, capsys, extra, message):
    with pytest.raises(SystemExit) as e:
        steer_cli(tmp_path / "T", maze_agent, "--levels", "1", "--vector-levels", "0:1", *extra)
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and "Traceback" not in err


def test_retargeting_is_refused_where_the_camera_follows_the_agent(tmp_path, capsys):
    """CoinRun's view is centred on the agent: a fixed map position would move with it."""
    agent = agent_checkpoint(
        tmp_path / "coinrun", AgentConfig(core="none", **TINY_AGENT), EnvConfig(game=("coinrun",), num_envs=2)
    )
    with pytest.raises(SystemExit) as e:
        steer_cli(tmp_path / "T", agent, "--levels", "1", "--vector-levels", "0:2", "--channels", "1")
    err = capsys.readouterr().err
    assert (
        e.value.code == 2
        and "coinrun's camera follows the agent" in err
        and len(err.strip().splitlines()) == 1
    )


def test_the_mean_vector_is_played_only_when_asked_and_says_why(tmp_path, maze_agent, capsys):
    out = tmp_path / "M"
    steer_cli(
        out, maze_agent, "--levels", "1", "--vector-levels", "0:2", "--coefficients", "0", "--no-per-level",
        "--rows", "2", "--bootstrap", "20",
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert "vector: the mean over levels" in printed and "smeared" in printed
    summary = json.loads((out / "steer" / "summary.json").read_text())
    assert summary["vector"]["kind"] == "mean" and "controls" not in summary
