"""A population of PPO agents: the grid's order and names, training and evaluating its members, a restart that
trains nothing again, and a failing member that leaves the others alone; with Ray, the same on a cluster of two
nodes on this machine (``ray_cluster``)."""

import csv
import importlib.util
import math
import shutil
import sys
from dataclasses import replace

import pytest

from proclab.errors import ProclabError
from proclab.rl.config import preset
from proclab.rl.population import CSV, Member, Population, PopulationSettings, train_population
from proclab.run.runtime import RuntimeConfig
from support import TINY_AGENT

TINY = preset("tiny")
BASE = replace(
    TINY,
    env=replace(TINY.env, num_envs=4),
    agent=replace(TINY.agent, **TINY_AGENT),
    ppo=replace(TINY.ppo, num_steps=32, num_minibatches=2),
    val_num_envs=0,
    tensorboard=False,
    learner_layout="whole:intra,acting:intra",  # nothing to time: the tests pay for training alone
)
"""The tiny preset at its smallest: one update is 4 envs x 32 steps."""
RUNTIME = RuntimeConfig(device="cpu", precision="fp32", torch_threads=1)
STEPS = 256


def test_members_expand_the_grid_in_a_fixed_order_with_stable_names():
    settings = PopulationSettings(
        seeds=(1, 2),
        games=("coinrun", "maze"),
        level_rules=("none", "coin-moved:percent=50"),
        presets=("tiny",),
    )
    expected = [
        Member(seed, game, rule, "tiny")
        for seed in (1, 2)
        for game in ("coinrun", "maze")
        for rule in ("none", "coin-moved:percent=50")
    ]
    assert list(settings.members()) == expected
    assert [m.name for m in settings.members()][:2] == [
        "coinrun-tiny-rule_none-s1",
        "coinrun-tiny-rule_coin-moved_percent_50-s1",
    ]
    assert settings.members() == settings.members()
    assert Member(1, "bigfish", "none", BASE).name == "bigfish-tiny-rule_none-s1"  # a config: its name


def test_a_reward_rule_is_an_axis_of_the_grid_and_reaches_the_member_s_training_config(tmp_path):
    settings = PopulationSettings(
        games=("maze",),
        level_rules=("cheese-region:size=99",),
        reward_rules=("none", "corner-pays"),
        presets=("tiny",),
    )
    plain, paid = settings.members()
    assert (plain.reward_rule, paid.reward_rule) == ("none", "corner-pays")
    assert plain.name == "maze-tiny-rule_cheese-region_size_99-s1"  # unchanged: earlier populations resume
    assert paid.name == "maze-tiny-rule_cheese-region_size_99-pays_corner-pays-s1"
    assert plain.config(STEPS, tmp_path, RUNTIME).reward_rule == ""
    assert paid.config(STEPS, tmp_path, RUNTIME).reward_rule == "corner-pays"
    assert paid.result("trained").reward_rule == "corner-pays"


def test_settings_given_twice_are_refused():
    with pytest.raises(Exception, match="share a name"):
        PopulationSettings(seeds=(1, 1)).members()


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    root = tmp_path_factory.mktemp("population")
    settings = PopulationSettings(
        seeds=(1, 2), games=("bigfish",), presets=(BASE,), steps=STEPS, eval_episodes=2
    )
    return settings, root, train_population(settings, root, runtime=RUNTIME, progress=False)


def test_every_member_trains_and_is_evaluated(population):
    _, root, result = population
    rows = result.table()
    assert [r["member"] for r in rows] == ["bigfish-tiny-rule_none-s1", "bigfish-tiny-rule_none-s2"]
    for row in rows:
        assert row["error"] is None and row["status"] == "trained"
        assert row["steps"] == STEPS
        assert math.isfinite(row["train_return"]) and math.isfinite(row["held_out_return"])
        assert (root / "ppo" / "bigfish" / row["member"]).is_dir()
    with (root / CSV).open(newline="") as f:
        written = list(csv.DictReader(f))
    assert [r["member"] for r in written] == [r["member"] for r in rows]
    assert [float(r["train_return"]) for r in written] == pytest.approx([r["train_return"] for r in rows])


def test_the_population_saves_loads_and_becomes_a_frame(population, tmp_path):
    _, _, result = population
    assert Population.load(result.save(tmp_path / "saved")) == result
    if importlib.util.find_spec("pandas") is None:
        with pytest.raises(ProclabError, match="pip install pandas"):
            result.to_frame()
    else:
        frame = result.to_frame()
        assert list(frame["member"]) == [m.name for m in result.members]


def test_a_second_call_trains_nothing_again(population):
    settings, root, first = population
    checkpoints = sorted(root.glob("ppo/*/*/*/checkpoints/*/*"))
    stamps = {p: p.stat().st_mtime_ns for p in checkpoints}
    again = train_population(settings, root, runtime=RUNTIME, progress=False)
    assert [m.status for m in again.members] == ["finished before"] * 2
    assert [{**r, "status": None} for r in again.table()] == [{**r, "status": None} for r in first.table()]
    assert sorted(root.glob("ppo/*/*/*/checkpoints/*/*")) == checkpoints
    assert {p: p.stat().st_mtime_ns for p in checkpoints} == stamps


def test_a_larger_budget_resumes_the_finished_run(population, tmp_path):
    settings, root, first = population
    # a copy of the runs, so that the module's population stays as the other tests read it
    shutil.copytree(root / "ppo", tmp_path / "ppo")
    more = replace(settings, seeds=(1,), steps=2 * STEPS)
    (member,) = train_population(more, tmp_path, runtime=RUNTIME, progress=False).members
    assert member.status == "resumed" and member.steps == 2 * STEPS and member.error is None
    assert member.run_dir is not None and member.run_dir.name == first.members[0].run_dir.name
    assert "ppo.total_steps" in (member.run_dir / "config_history.jsonl").read_text()


def test_a_failing_member_is_a_row_and_the_others_train(tmp_path):
    # a CoinRun rule on BigFish fails as the member starts, before any run folder is made
    settings = PopulationSettings(
        seeds=(1,), games=("bigfish",), level_rules=("none", "coin-moved"), presets=(BASE,), steps=128,
        eval_episodes=1,
    )  # fmt: skip
    result = train_population(settings, tmp_path, runtime=RUNTIME, progress=False)
    fine, failed = result.members
    assert fine.error is None and fine.steps == 128 and fine.status == "trained"
    assert failed.status == "failed" and "coinrun" in (failed.error or "") and failed.run_dir is None
    assert result.failed == (failed,)
    assert not list(tmp_path.glob("ppo/*/*coin-moved*"))
    with (tmp_path / CSV).open(newline="") as f:
        assert [r["error"] for r in csv.DictReader(f)] == ["", failed.error]


@pytest.mark.heavy  # make test-heavy: two members trained in spawned processes
def test_workers_train_members_in_processes_of_their_own(tmp_path):
    settings = PopulationSettings(
        seeds=(1,), games=("bigfish",), level_rules=("none", "coin-moved"), presets=(BASE,), steps=128,
        eval_episodes=1, workers=2,
    )  # fmt: skip
    result = train_population(settings, tmp_path, runtime=RUNTIME, progress=False)
    # the grid's order, whichever finished first
    assert [m.status for m in result.members] == ["trained", "failed"]
    assert result.members[0].steps == 128 and math.isfinite(result.members[0].train_return)


def test_ray_without_ray_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as without the extra, installed or not: import ray fails
    settings = PopulationSettings(seeds=(1,), games=("bigfish",), presets=(BASE,), ray_address="auto")
    with pytest.raises(ProclabError, match=r"pip install 'proclab\[distributed\]'"):
        train_population(settings, tmp_path, runtime=RUNTIME, progress=False)


@pytest.mark.distributed
def test_a_population_trains_on_a_two_node_cluster(ray_cluster, tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    settings = PopulationSettings(
        seeds=(1, 2), games=("bigfish",), level_rules=("none", "coin-moved"), presets=(BASE,), steps=128,
        eval_episodes=1, ray_address=ray_cluster.address,
    )  # fmt: skip
    result = train_population(settings, tmp_path, runtime=RUNTIME, progress=False)
    # the grid's order; the CoinRun rule on BigFish is a failed row with its error, the others trained
    assert [m.name for m in result.members] == [m.name for m in settings.members()]
    assert [m.status for m in result.members] == ["trained", "failed", "trained", "failed"]
    for m in result.members[::2]:
        assert m.steps == 128 and m.run_dir is not None and math.isfinite(m.held_out_return)
    assert all("coinrun" in (m.error or "") for m in result.failed)
    again = train_population(settings, tmp_path, runtime=RUNTIME, progress=False)
    assert [m.status for m in again.members[::2]] == ["finished before"] * 2
    assert [m.train_return for m in again.members[::2]] == [m.train_return for m in result.members[::2]]
    # the same member trained without Ray: the same run (training is seeded; one thread each)
    local = train_population(
        PopulationSettings(seeds=(1,), games=("bigfish",), presets=(BASE,), steps=128, eval_episodes=1),
        tmp_path / "local", runtime=RUNTIME, progress=False,
    )  # fmt: skip
    assert local.members[0].train_return == result.members[0].train_return
    assert local.members[0].held_out_return == result.members[0].held_out_return


def test_the_latest_run_of_a_member_is_of_its_own_seed(tmp_path):
    """Runs of one name and two seeds are two members: a seed with no run of its own trains, it does not take
    (or call finished) the other seed's run."""
    from proclab.rl.population import latest_run
    from support import TINY_AGENT, agent_checkpoint

    config = replace(preset("tiny"), run_root=tmp_path, name="organism", seed=2)
    env = replace(config.env, game=("coinrun",))
    one = tmp_path / "ppo" / "coinrun" / "organism" / "1-20260101-000000"
    agent_checkpoint(one, replace(config.agent, **TINY_AGENT), env)
    (one / "config.json").write_text("{}")
    assert latest_run(tmp_path, config) == (None, 0)
    assert latest_run(tmp_path, replace(config, seed=1)) == (one, 0)
    two = tmp_path / "ppo" / "coinrun" / "organism" / "2-20260101-000000"
    agent_checkpoint(two, replace(config.agent, **TINY_AGENT), env)
    (two / "config.json").write_text("{}")
    assert latest_run(tmp_path, config) == (two, 0)
