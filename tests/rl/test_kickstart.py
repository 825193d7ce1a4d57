"""Kickstarting (``PPOConfig.teacher``): the cross-entropy to a planner's action against a per-sample
reference, its linear decay, labels that belong to the very state the agent acted in, a learner that moves
the policy towards the teacher, and the one-line errors of a bad teacher."""

import json
import math

import numpy as np
import pytest
import torch

import proclab
from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.models.planners import MazePlanner
from proclab.rl.config import PPOConfig
from proclab.rl.ppo import Batch, PPOLearner, ppo_loss
from proclab.rl.rollout import Actor, Rollout
from proclab.run.runtime import make_runtime
from support import TINY_PPO, benchmark, collected, one_line_error, with_game


def test_the_teacher_term_is_the_cross_entropy_to_its_action():
    rng = np.random.default_rng(3)
    n, a, coef = 48, 15, 0.7
    logits = torch.tensor(rng.normal(size=(n, a)), dtype=torch.float32)
    actions = torch.tensor(rng.integers(0, a, n))
    teacher = torch.tensor(rng.integers(0, a, n))
    logp = torch.log_softmax(logits, -1).gather(1, actions[:, None]).squeeze(1)
    zeros = torch.zeros(n)
    mb = Batch(None, None, None, actions, logp, zeros, torch.randn(n), zeros, None, teacher)
    cfg = PPOConfig(teacher="cheese-planner")
    with_teacher, stats = ppo_loss(logits, zeros, mb, cfg, teacher_coef=coef)
    alone, _ = ppo_loss(logits, zeros, Batch(**{**vars(mb), "teacher_actions": None}), cfg)

    cross_entropy = agree = 0.0
    for i in range(n):
        z = [float(x) for x in logits[i]]
        lse = max(z) + math.log(sum(math.exp(x - max(z)) for x in z))
        cross_entropy += (lse - z[int(teacher[i])]) / n
        agree += (int(np.argmax(z)) == int(teacher[i])) / n
    assert float(with_teacher - alone) == pytest.approx(coef * cross_entropy, rel=1e-5)
    assert float(stats["losses/teacher_loss"]) == pytest.approx(cross_entropy, rel=1e-5)
    assert float(stats["losses/teacher_agreement"]) == pytest.approx(agree)


def test_the_teachers_weight_decays_linearly_over_its_steps():
    rt = make_runtime("cpu", "fp32")
    agent = torch.nn.Linear(1, 1)
    agent.initial_state = lambda n: {}  # what the learner asks of an agent before any update
    learner = PPOLearner(
        agent, PPOConfig(teacher="coin-planner", teacher_coef=2.0, teacher_steps=1000), rt, 10, 300
    )
    coefs = []
    for updates in range(6):
        learner.updates = updates
        coefs.append(learner.teacher_coef())
    assert coefs == pytest.approx([2.0 * max(0.0, 1 - 300 * u / 1000) for u in range(6)])
    constant = PPOLearner(agent, PPOConfig(teacher="coin-planner", teacher_coef=0.5), rt, 10, 300)
    constant.updates = 10**6
    assert constant.teacher_coef() == 0.5
    assert PPOLearner(agent, PPOConfig(), rt, 10, 300).teacher_coef() == 0.0


def test_each_label_is_the_teachers_action_in_the_state_the_agent_acted_in():
    """The actor plays the maze planner itself and the planner labels: a label from any other state (one step
    late, another slot's, an episode's first state after it ended) would differ from the action played."""
    rt = make_runtime("cpu", "fp32")
    env = ProcgenVecEnv(EnvConfig(game=("maze",), num_envs=4, level_rule="cheese-region:size=3"), seed=2)
    actor = Actor(env, MazePlanner("cheese"), rt)
    rollout = Rollout.allocate(40, 4, rt.device)
    actor.collect(rollout, teacher=MazePlanner("cheese"))
    assert rollout.dones.any(), "no maze was solved inside the rollout: the test would not cover resets"
    assert torch.equal(rollout.teacher_actions, rollout.actions)
    assert len(rollout.actions.unique()) > 1


def test_the_learner_moves_the_policy_towards_the_teacher():
    """With zero advantages and no value or entropy terms, only the teacher's term moves the policy."""
    agent, ro, _ = collected("none", make_runtime("cpu", "fp32"), num_envs=4, num_steps=8)
    ro.rewards.zero_()
    ro.values.zero_()
    ro.next_value = torch.zeros_like(ro.next_value)
    ro.teacher_actions = torch.full_like(ro.actions, 7)  # a teacher that always presses one button
    cfg = PPOConfig(num_steps=8, num_minibatches=1, update_epochs=8, vf_coef=0.0, ent_coef=0.0,
                    norm_adv=False, learning_rate=1e-2, teacher="cheese-planner")  # fmt: skip
    learner = PPOLearner(agent, cfg, make_runtime("cpu", "fp32"), total_updates=40, batch=32)
    first = learner.update(ro)
    for _ in range(8):
        last = learner.update(ro)
    assert last["losses/teacher_loss"] < 0.1 * first["losses/teacher_loss"]
    assert last["losses/teacher_agreement"] == 1.0 > first["losses/teacher_agreement"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--teacher", "nobody"], "teacher 'nobody' is not a planner; choose one of coin-planner"),
        (["--teacher", "coin-planner"], "teacher 'coin-planner' plays coinrun, not dodgeball"),
        (
            ["--teacher", "coin-planner", "--teacher-coef", "-1"],
            "--teacher-coef and --teacher-steps must be >= 0",
        ),
    ],
)
def test_a_bad_teacher_is_one_line(tmp_path, capsys, flags, message):
    args = ["train", *TINY_PPO, "--torch-threads", "1", *flags, "--run-root", str(tmp_path / "runs")]
    assert message in one_line_error(capsys, args)
    assert not (tmp_path / "runs").exists()


def test_a_teacher_teaches_one_game(tmp_path, capsys):
    args = ["train", *with_game(TINY_PPO, "maze", "coinrun"), "--teacher", "cheese-planner"]
    assert "--teacher teaches one game" in one_line_error(capsys, [*args, "--run-root", str(tmp_path)])


def test_the_cost_benchmark_prints_both_rates_and_their_ratio(capsys):
    """Smoke test of ``benchmarks/kickstart_cost.py`` at toy size (no timings asserted)."""
    benchmark("kickstart_cost").main(["--num-envs", "2", "--num-steps", "4", "--rounds", "1"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["game"] for r in rows] == ["coinrun", "maze"]
    for r in rows:
        assert r["steps_each"] == 8 and r["collect_sps_plain"] > 0 and r["collect_sps_teacher"] > 0
        assert abs(r["ratio"] - r["collect_sps_teacher"] / r["collect_sps_plain"]) < 0.01


def test_the_python_api_trains_with_a_teacher(tmp_path):
    """``proclab.train(..., teacher=)`` is the flag's way in Python: the run's config names the planner and its
    decay, and another game's planner is refused in one line before anything trains."""
    from proclab.errors import ProclabError
    from proclab.rl.ppo_train import preset_config

    cfg = preset_config("coinrun", "quickstart", runs=tmp_path, teacher="coin-planner", teacher_steps=5_000)
    assert (cfg.ppo.teacher, cfg.ppo.teacher_steps) == ("coin-planner", 5_000)
    assert preset_config("coinrun", "quickstart", runs=tmp_path).ppo.teacher is None
    with pytest.raises(ProclabError, match="plays maze, not coinrun"):
        proclab.train("coinrun", steps=1024, runs=tmp_path, teacher="cheese-planner")
    assert not any(tmp_path.iterdir())
