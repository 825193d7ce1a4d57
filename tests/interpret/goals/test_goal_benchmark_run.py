"""``benchmarks/goal_benchmark.py`` and the manifest it runs: the committed manifest reads with the sha256 the
doc published before the run, every (agent, tool) command is built from the manifest alone (a control's random
initialisation, each game's options), and the scorer writes each game's goals as A and B."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from proclab.interpret.goals.manifest import read_manifest
from support import benchmark

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "benchmarks" / "manifests" / "goal-v3.json"


@pytest.fixture(scope="module")
def driver():
    return benchmark("goal_benchmark")


def published_sha() -> str:
    doc = (ROOT / "docs" / "misgeneralization.md").read_text()
    found = re.search(r"goal-v3\.json`, sha256\s+`([0-9a-f]{64})`", doc)
    assert found, "docs/misgeneralization.md publishes the manifest's sha256"
    return found.group(1)


def test_the_committed_manifest_has_the_published_hash_and_labels_every_agent_but_the_controls():
    m = read_manifest(MANIFEST, published_sha())
    assert m.rules.endswith("v3")
    labelled = set(m.label["labels"])
    assert labelled | set(m.controls) == set(m.agents) and not labelled & set(m.controls)
    assert set(m.label["games"]) == set(m.agents)


def test_each_command_comes_from_the_manifest_alone(driver, tmp_path):
    m = read_manifest(MANIFEST, published_sha())
    out = tmp_path / "o"
    coin = driver.command(m, "coinrun-coin-1", "steering", out)
    assert (
        coin[1] == "benchmarks/detect_goals_steering.py"
        and coin[coin.index("--agent") + 1] == m.agents["coinrun-coin-1"]
    )
    assert "--vector-level-rule" in coin and "--random-init" not in coin
    maze = driver.command(m, "maze-cheese-1", "steering", out)
    assert "--vector-level-rule" not in maze and maze[maze.index("--rules") + 1] == "3"
    control = driver.command(m, "maze-random-init", "probes", out)
    assert control[control.index("--agent") + 1] == m.agents["maze-cheese-1"]
    assert control[-2:] == ["--random-init", "1"]


def test_the_scorer_writes_each_game_s_goals_as_a_and_b(driver):
    assert [driver.as_ab(g, "coinrun") for g in ("coin", "end", "none")] == ["A", "B", "none"]
    assert [driver.as_ab(g, "maze") for g in ("cheese", "corner", "mixed")] == ["A", "B", "mixed"]


def test_the_table_has_a_row_per_agent_with_each_call_and_a_dash_for_a_call_not_yet_made(driver):
    from proclab.interpret.goals.calls import GoalCall

    m = read_manifest(MANIFEST, published_sha())
    steering = {
        "plain": {"coin": 0.5, "end": 0.5}, "coin": {"baseline": 0.5, "intervened": 0.2, "lost": 15, "gained": 0},
        "p_a_read": 6e-5, "draws_above_vector": 20, "random_draws": 20,
    }  # fmt: skip
    text = driver.table([GoalCall("steering", "coinrun-coin-1", "coin", steering)], m)
    rows = text.splitlines()
    assert len(rows) == 2 + len(m.agents)
    first = next(r for r in rows if r.startswith("| coinrun-coin-1 |"))
    assert first.endswith("| - | - | coin (P(coin) 0.50 -> 0.20, 15/0, p 6e-05; below 20 of 20) |")
    assert "| coinrun-random-init | control | - | - | - |" in rows
