"""Both goals per episode agree in ``proclab eval``, the recorded store (and ``data info``) and the rollout:
the same scripted agent on the same planted Maze levels, whose answers are known."""

import numpy as np

import proclab
from level_fixtures import ending_soon
from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs.actions import ACTION_NAMES
from proclab.envs.state import corner_cell
from proclab.levels.level import Level, as_level_states
from proclab.levels.play import LevelsEnv
from proclab.models.scripted import ScriptedAgent
from proclab.record import EpisodeRecorder
from proclab.record.ground_truth import ground_truth_names
from proclab.rl.evaluate import evaluate, rows_table
from proclab.run.runtime import make_runtime
from proclab.store import EpisodeStore, ShardWriter
from proclab.store.command import info_command as data_info
from proclab.store.info import summarize
from proclab.store.schema import GROUND_TRUTH_ATTR

CHEESE, MAZE_WALL = 2, 51


def planted_mazes() -> tuple[list[Level], list[tuple[bool, bool]]]:
    """Three levels and the (cheese, corner) an always-right agent gets on each: beside the corner with the
    cheese elsewhere (corner only), the same with the cheese in the corner (both), and the level as
    generated, the agent in the bottom-left cell with the corner a row above it at least (neither or the
    cheese alone, which the agent may run into: the test reads that one from the level). Their clocks
    are set 30 steps before the time limit, so that the episodes that reach no cheese end soon."""
    for seed in range(50):
        level = Level.generate("maze", seed, mode="easy")
        row, col = corner_cell(level.parsed)
        grid = level.parsed.grid
        if grid[row, col - 1] != MAZE_WALL and grid[row, col] != CHEESE and level.parsed.extra.maze_dim > 3:
            break
    beside = ending_soon(level.with_agent_at((col - 0.5, row + 0.5)))
    in_corner = beside.move("cheese", (col + 0.5, row + 0.5))
    agent_row, agent_col = int(level.parsed.agent.y), int(level.parsed.agent.x)
    run = agent_col  # the cells an always-right agent walks through, until a wall
    while grid[agent_row, run + 1] != MAZE_WALL:
        run += 1
    cheese_on_the_way = any(grid[agent_row, c] == CHEESE for c in range(agent_col, run + 1))
    return [beside, in_corner, ending_soon(level)], [(False, True), (True, True), (cheese_on_the_way, False)]


def test_eval_record_and_rollout_agree_on_both_goals(tmp_path, capsys, monkeypatch):
    levels, expected = planted_mazes()
    agent, rt = ScriptedAgent(ACTION_NAMES.index("right")), make_runtime("cpu", "fp32")
    config = EnvConfig(game=("maze",), mode="easy", num_envs=3, split="0:1", num_threads=1)
    states = as_level_states(levels)

    evaluated = evaluate(agent, config, "planted", 3, rt, envs_per_game=3, levels=states, goals=True)["maze"]
    writer = ShardWriter(tmp_path / "DATA", attrs={GROUND_TRUTH_ATTR: ground_truth_names(["maze"])})
    with LevelsEnv(ProcgenVecEnv(config), states) as env:
        EpisodeRecorder(env, agent, rt, ground_truth=True).run(3, writer.append)
    writer.close()
    store = EpisodeStore(tmp_path / "DATA")
    ro = proclab.rollout(
        agent, game="maze", mode="easy", levels=levels, episodes=3, num_envs=3, runtime=rt, truth=True
    )

    def outcomes(lengths, cheese, corner) -> list:
        columns = (np.asarray(lengths).tolist(), np.asarray(cheese).tolist(), np.asarray(corner).tolist())
        return sorted(zip(*columns, strict=True))

    from_eval = outcomes(evaluated.lengths, evaluated.goals["cheese"], evaluated.goals["corner"])
    e = store.episodes
    from_store = outcomes(e["length"], e["goal/cheese"], e["goal/corner"])
    from_rollout = outcomes(ro.lengths, ro.goals["cheese"], ro.goals["corner"])
    assert from_eval == from_store == from_rollout
    assert [(r["cheese"], r["corner"]) for r in ro.table()] == expected  # the rollout keeps the levels' order
    assert ro.goals["cheese"].tolist() == ro.level_complete.tolist()

    summary = evaluated.summary("easy")["goals"]
    info = summarize(store)["games"]["maze"]["goals"]
    for name in ("cheese", "corner"):
        count = sum(reached for *_, reached in [(c,) if name == "cheese" else (k,) for _, c, k in from_eval])
        assert (
            summary[name]["count"] == info[name]["count"] == count
            and summary[name]["of"] == info[name]["of"] == 3
        )
        assert summary[name]["ci95"] == info[name]["ci95"]
    monkeypatch.setenv("COLUMNS", "250")
    data_info(["--data", str(tmp_path / "DATA")])  # proclab data info, its table of goals
    shown = capsys.readouterr().out
    corner = info["corner"]
    assert f"{corner['count']}/3" in shown and "[{:.3f}, {:.3f}]".format(*corner["ci95"]) in shown
    table = {"rows": [evaluated.summary("easy")], "aggregate": {}}
    assert [c.header for c in rows_table(table, "t", several_games=False).columns][-2:] == [
        "cheese [95% CI] n",
        "corner [95% CI] n",
    ]
