"""Level rules (proclab.envs.rules): parsing, determinism, playability over thousands of generated levels,
the fork's section starts on planted layouts, and every episode start of a vector env edited."""

import dataclasses
from collections import deque

import numpy as np
import pytest

from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs.rules import (
    coinrun_floor_cells,
    coinrun_raised_cells,
    coinrun_section_starts,
    parse_rule,
    with_rule,
)
from proclab.envs.state import corner_cell, end_cell, parse_state, positions, serialize_state
from proclab.errors import ProclabError
from proclab.levels.level import generate_level

SOLID = (15, 16)


def coinrun_end(state) -> tuple[int, int]:
    """The end cell as ``(x, y)``."""
    row, col = end_cell(state.grid)
    return col, row


def maze_corner(state) -> tuple[int, int]:
    row, col = corner_cell(state)
    return col, row


SPACE, WALL_TOP, BARRIER = 100, 16, 19


def generated(game: str, mode: str, count: int, seed: int = 0) -> list:
    """``count`` level starts (level seed, parsed state) of ``game``, 64 per vector env reset."""
    out = []
    env = ProcgenVecEnv(
        EnvConfig(game=(game,), mode=mode, num_envs=64, split="0:1000000", num_threads=1), seed=seed
    )
    for k in range(-(-count // 64)):
        env.seed = seed + k
        _, info = env.reset()
        out += [(int(s), parse_state(b)) for s, b in zip(info["level_seed"], env.slot_states(), strict=True)]
    env.close()
    return out[:count]


# -- parsing ----------------------------------------------------------------------------------------------
def test_rules_parse_with_defaults_spelled_out_and_refuse_bad_text_in_one_line():
    assert parse_rule("coin-moved").text == "coin-moved:percent=100.0,place=sections,seed=0"
    assert parse_rule("cheese-region:size=5,seed=3").text == "cheese-region:size=5,seed=3"
    for bad, words in [
        ("coin-move", "Did you mean 'coin-moved'"),
        ("coin-moved:percent=150", "percent must be in [0, 100]"),
        ("coin-moved:place=air", "place must be sections, floor or raised"),
        ("coin-moved:size=3", "KEY one of percent, place, seed"),
        ("cheese-region:size=0", "size must be at least 1"),
        ("cheese-region:size=two", "size='two' is not a int"),
        ("cheese-region:size", "expected KEY=VALUE"),
    ]:
        with pytest.raises(ProclabError, match=words.replace("[", r"\[").replace("]", r"\]")):
            parse_rule(bad)
    with pytest.raises(ProclabError, match="edits coinrun levels; the env plays maze"):
        ProcgenVecEnv(EnvConfig(game=("maze",), level_rule="coin-moved", num_envs=1))
    from proclab.command import parse_args

    trained, _ = parse_args(
        ["--preset", "tiny", "--game", "coinrun", "--level-rule", "coin-moved:percent=30"]
    )
    assert trained.env.level_rule == "coin-moved:percent=30.0,place=sections,seed=0"  # saved spelled out
    config = EnvConfig(level_rule="coin-moved:percent=20")
    assert with_rule(config, None) is config
    assert with_rule(config, "none").level_rule == ""
    assert (
        with_rule(config, "coin-moved:place=floor").level_rule
        == "coin-moved:percent=100.0,place=floor,seed=0"
    )


# -- what the rules do, checked from first principles ------------------------------------------------------
def _free(state, col: int, row: int) -> bool:
    """No entity but the agent overlaps the cell (written without the module's helpers)."""
    for e in state.entities:
        near_x = abs(e.x - (col + 0.5)) < e.rx + 0.5 - 1e-3
        if e.kind != "agent" and near_x and abs(e.y - (row + 0.5)) < e.ry + 0.5 - 1e-3:
            return False
    return True


def _floor_cell_ok(state, col: int, row: int) -> bool:
    """A coin cell a player can take: open, on solid ground, free of every entity but the agent, and
    between the first section and the end of the level."""
    solid = (state.grid == SOLID[0]) | (state.grid == SOLID[1])
    end = np.flatnonzero(~solid.all(axis=0)).max()
    return _free(state, col, row) and 5 <= col < end and not solid[row, col] and solid[:row, col].all()


def _raised_cell_ok(state, col: int, row: int) -> bool:
    """Two cells above a takeable floor cell, both cells above the floor empty and free (a jump takes it)."""
    empty = [state.grid[r, col] == 100 and _free(state, col, r) for r in (row - 1, row)]  # 100: empty
    return _floor_cell_ok(state, col, row - 2) and all(empty)


def test_coin_moved_only_to_takeable_floor_cells_on_thousands_of_levels():
    rules = {place: parse_rule(f"coin-moved:place={place}") for place in ("sections", "floor", "raised")}
    cells = {"sections": coinrun_section_starts, "floor": coinrun_floor_cells, "raised": coinrun_raised_cells}
    kept = 0
    for level_seed, state in generated("coinrun", "hard", 2048):
        end = coinrun_end(state)
        assert (
            tuple(int(v) for v in positions(state, "coin")[0] - 0.5) == end
        )  # standard CoinRun: coin at the end
        for place, rule in rules.items():
            edited = rule.apply(state, level_seed)
            coins = positions(edited, "coin")
            assert len(coins) == 1
            col, row = (int(v) for v in coins[0] - 0.5)
            if (col, row) == end:
                kept += 1  # a level with no section to move it to
                assert len(cells[place](state)) == 0
                continue
            ok = _raised_cell_ok if place == "raised" else _floor_cell_ok
            assert ok(state, col, row), (level_seed, place, col, row)
            assert coinrun_end(edited) == end  # the end is still read from the layout
            if place == "sections":
                assert (col, row) in {tuple(c) for c in coinrun_floor_cells(state)}
    assert kept < 20  # almost every level has a section


def test_cheese_region_puts_the_cheese_on_a_reachable_open_cell_of_the_region_on_thousands_of_levels():
    for size in (1, 5):
        rule = parse_rule(f"cheese-region:size={size}")
        for level_seed, state in generated("maze", "easy", 1024, seed=size):
            edited = rule.apply(state, level_seed)
            cheese = positions(edited, "cheese")
            assert len(cheese) == 1
            col, row = (int(v) for v in cheese[0] - 0.5)
            corner = maze_corner(state)
            dim = int(state.extra.maze_dim)
            assert (
                corner[0] - min(size, dim) < col <= corner[0]
                and corner[1] - min(size, dim) < row <= corner[1]
            )
            assert (col, row) != (int(state.agent.x), int(state.agent.y))
            # reachable: a breadth-first walk over open cells from the agent finds it
            open_ = edited.grid != 51
            start = (int(state.agent.x), int(state.agent.y))
            seen, todo = {start}, deque([start])
            while todo:
                x, y = todo.popleft()
                for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                    if (
                        (nx, ny) not in seen
                        and 0 <= ny < open_.shape[0]
                        and 0 <= nx < open_.shape[1]
                        and open_[ny, nx]
                    ):
                        seen.add((nx, ny))
                        todo.append((nx, ny))
            assert (col, row) in seen
            if size == 1:
                assert (col, row) == corner


def test_percent_moves_that_share_of_levels_and_the_same_seed_gives_the_same_edit():
    levels = generated("coinrun", "hard", 512, seed=7)
    half = parse_rule("coin-moved:percent=50")
    moved = [half.apply(s, seed) is not s for seed, s in levels]
    n, k = len(moved), sum(moved)
    assert abs(k - n / 2) < 4 * np.sqrt(n / 4), k  # binomial(512, 1/2): 4 standard deviations
    again = parse_rule("coin-moved:percent=50")
    for seed, s in levels[:64]:
        assert serialize_state(half.apply(s, seed)) == serialize_state(again.apply(s, seed))
    other = parse_rule("coin-moved:percent=50,seed=1")
    assert [other.apply(s, seed) is not s for seed, s in levels] != moved  # another rule seed, other draws


# -- the fork's distribution: section starts on planted layouts --------------------------------------------
def planted(base, sections: list[tuple[int, int, bool]]):
    """A CoinRun layout built as CoinRun's generator builds one, from ``(width, height, pit)`` sections
    starting at x = 5, with the enemy barriers it writes; returns the state and the true section starts."""
    grid = np.full(base.grid.shape, SPACE, np.int32)
    grid[0, :] = WALL_TOP
    grid[:, 0] = WALL_TOP
    x, y, starts = 5, 1, []
    for width, height, pit in sections:
        y = height
        starts.append((x, y))
        if pit:  # ground on both sides, a pit of open cells down to the floor in between
            grid[:y, x : x + 2] = WALL_TOP
            grid[:y, x + width - 2 : x + width] = WALL_TOP
        else:
            grid[:y, x : x + width] = WALL_TOP
        if grid[y, x - 1] not in SOLID:
            grid[y, x - 1] = BARRIER
        x += width
        grid[y, x] = BARRIER
    grid[y, x] = 1  # the coin at the end, the wall beyond
    grid[:y, x] = WALL_TOP
    grid[:, x + 1 :] = 15
    agent = next(e for e in base.entities if e.kind == "agent")
    return dataclasses.replace(base, grid=grid, entities=[agent]), starts


@pytest.mark.parametrize(
    "sections",
    [
        [(4, 3, False), (6, 6, False), (5, 4, False)],  # up, up, down
        [(5, 2, False), (8, 5, True), (4, 2, False)],  # a pit section
        [(4, 3, False), (4, 3, False), (6, 7, False), (3, 7, False)],  # level boundaries
    ],
)
def test_section_starts_are_recovered_from_a_planted_layout(sections):
    base = parse_state(generate_level("coinrun", "hard", 3).data)
    state, starts = planted(base, sections)
    assert [tuple(c) for c in coinrun_section_starts(state)] == starts
    assert coinrun_end(state) == (5 + sum(w for w, _, _ in sections), sections[-1][1])


# -- the env applies the rule at every episode start -------------------------------------------------------
def test_every_episode_start_of_a_vector_env_plays_the_edited_level():
    rule = parse_rule("coin-moved:place=floor")
    config = EnvConfig(
        game=("coinrun",), mode="hard", num_envs=4, split="100:6", level_rule=rule.text, num_threads=1
    )

    def layout(state):  # what the level holds (a one-env generator's states differ in procgen's bookkeeping)
        return state.grid.tobytes(), tuple((e.kind, e.x, e.y) for e in state.entities)

    starts = {
        lv: layout(rule.apply(parse_state(generate_level("coinrun", "hard", lv).data), lv))
        for lv in range(100, 106)
    }
    env = ProcgenVecEnv(config, seed=3)
    _, info = env.reset()
    checked = 0
    for slot, lv in enumerate(info["level_seed"]):
        assert layout(parse_state(env.slot_states()[slot])) == starts[int(lv)]
        checked += 1
    rng = np.random.default_rng(0)
    for _ in range(400):
        _, _, term, trunc, info = env.step(rng.integers(0, 15, 4))
        states = env.slot_states()
        for slot in np.flatnonzero(term | trunc):
            assert layout(parse_state(states[slot])) == starts[int(info["level_seed"][slot])]
            checked += 1
    env.close()
    assert checked > 4


# -- the commands play the rule, record it and refuse a bad one in one line --------------------------------
def test_commands_play_record_and_refuse_level_rules(tmp_path, capsys):
    import json

    import proclab
    from proclab.record import RecordSettings, new_recording, record_shard
    from proclab.rl.config import TrainConfig
    from proclab.run.runtime import RuntimeConfig
    from proclab.store import EpisodeStore
    from support import make_agent_checkpoint, one_line_error

    ckpt = make_agent_checkpoint(tmp_path / "run", game="maze")
    assert "unknown level rule 'cheese'" in one_line_error(
        capsys, ["eval", "--agent", str(ckpt), "--level-rule", "cheese"]
    )
    assert "edits coinrun levels" in one_line_error(
        capsys, ["eval", "--agent", str(ckpt), "--level-rule", "coin-moved"]
    )
    with pytest.raises(ProclabError, match="percent must be"):
        TrainConfig(env=EnvConfig(level_rule="coin-moved:percent=-1")).validate()

    def corner_cheese(state_bytes) -> bool:
        state = parse_state(state_bytes)
        return tuple(int(v) for v in positions(state, "cheese")[0] - 0.5) == maze_corner(state)

    # record: the rule spelled out in the recording, and every episode's first state edited
    out = tmp_path / "store"
    settings = RecordSettings(episodes=3, num_envs=3, level_rule="cheese-region")
    record_shard(
        new_recording(ckpt, out, settings),
        out,
        3,
        runtime=RuntimeConfig(device="cpu", precision="fp32", torch_threads=1),
    )
    store = EpisodeStore(out)
    (entry,) = store.recordings().values()
    assert entry["recording"]["args"]["level_rule"] == "cheese-region:size=1,seed=0"
    assert all(corner_cheese(store.read_blob("initial_state", i)) for i in range(2))

    # rollout: the same
    agent = proclab.load(ckpt, device="cpu", precision="fp32")
    ro = proclab.rollout(agent, episodes=2, num_envs=2, level_rule="cheese-region")
    assert ro.level_rule == "cheese-region:size=1,seed=0" and all(corner_cheese(b) for b in ro.start_states)

    # eval: the rule in the results
    one = tmp_path / "eval.json"
    proclab_main = __import__("proclab.cli", fromlist=["main"]).main
    proclab_main(["eval", "--agent", str(ckpt), "--level-rule", "cheese-region:size=3", "--split", "test1",
                  "--episodes", "1", "--envs-per-game", "1", "--out", str(one), "--torch-threads", "1"])  # fmt: skip
    assert json.loads(one.read_text())["level_rule"] == "cheese-region:size=3,seed=0"


def test_a_level_object_takes_the_rule_as_the_env_plays_it():
    import proclab

    level = proclab.Level.generate("maze", 11)
    edited = level.with_rule("cheese-region:size=1")
    assert tuple(int(v) for v in edited.positions("cheese")[0] - 0.5) == maze_corner(level.parsed)
    assert edited.state.note == "cheese-region:size=1,seed=0" and edited.level_seed == 11
