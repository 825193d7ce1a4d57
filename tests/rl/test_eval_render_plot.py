"""Evaluation quotas, the eval/render/plot commands on a real (tiny) run."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from proclab.envs.episodes import quotas
from proclab.models import AgentConfig, build_agent
from proclab.rl.evaluate import evaluate_env
from proclab.run.runtime import make_runtime
from support import TINY_FLAGS


class _LengthsEnv:
    """Slot i ends an episode every lengths[i] steps with return lengths[i]: short and long episodes."""

    games = ("coinrun",)

    def __init__(self, lengths):
        self.lengths = np.asarray(lengths)
        self.num_envs = len(lengths)
        self.game_index = np.zeros(self.num_envs, np.int64)
        self.t = 0

    def reset(self):
        return np.zeros((self.num_envs, 3, 64, 64), np.uint8), {}

    def step(self, actions):
        self.t += 1
        done = self.t % self.lengths == 0
        ep = {
            "done": done,
            "return": np.where(done, self.lengths, 0).astype(float),
            "length": np.where(done, self.lengths, 0),
            "level_complete": done,
        }
        z = np.zeros(self.num_envs, bool)
        return self.reset()[0], np.zeros(self.num_envs, np.float32), done, z, {"episode": ep}


def test_quotas_are_even_and_exact():
    assert list(quotas(10, 4)) == [3, 3, 2, 2]
    assert quotas(7, 7).tolist() == [1] * 7
    assert quotas(200, 16).sum() == 200


def test_fixed_quotas_do_not_favour_short_episodes():
    """Slot 0 finishes every 2 steps, slot 1 every 10: 'first 6 episodes' would be mostly short ones."""
    agent = build_agent(AgentConfig(widths=(4, 8, 8), fc=32))
    res = evaluate_env(agent, _LengthsEnv([2, 10]), 6, make_runtime("cpu", "fp32"))["coinrun"]
    assert sorted(res.returns) == [2, 2, 2, 10, 10, 10]
    assert np.mean(res.returns) == 6.0


@pytest.mark.parametrize("reset_every", [0, 3])
def test_reset_every_restarts_the_memory_periodically(reset_every):
    """modern-srwm's --test_no_carry_sr: besides episode starts, the state is reset every N steps."""
    agent = build_agent(AgentConfig(core="gru", rnn_size=8, widths=(4, 8, 8), fc=32))
    firsts = []
    step = agent.step

    def recording_step(obs, state, first, prev_reward=None):
        firsts.append(first.clone())
        return step(obs, state, first, prev_reward)

    agent.step = recording_step
    evaluate_env(agent, _LengthsEnv([5, 7]), 6, make_runtime("cpu", "fp32"), reset_every=reset_every)
    assert len(firsts) == 21 and all(len(f) == 2 for f in firsts[:15])  # slot 0 idles after its 3 episodes
    for t, first in enumerate(firsts[:15]):
        starts = [t == 0 or t % n == 0 for n in (5, 7)]  # the env's own episode starts
        periodic = reset_every > 0 and t > 0 and t % reset_every == 0
        assert first.tolist() == [s or periodic for s in starts], t


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for seed in (1, 2):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "proclab",
                "train",
                "--preset",
                "tiny",
                "--game",
                "bossfight",
                "--num-envs",
                "4",
                "--num-steps",
                "32",
                "--total-steps",
                "384",
                "--val-num-envs",
                "2",
                "--seed",
                str(seed),
                "--run-root",
                str(root),
                *TINY_FLAGS,
            ],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
    return sorted(root.glob("ppo/bossfight/tiny/*"))


@pytest.mark.heavy
def test_eval_json_per_split(tiny_run, tmp_path):
    out = tmp_path / "eval.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "proclab",
            "eval",
            "--agent",
            str(tiny_run[0]),
            "--split",
            "train",
            "--split",
            "test2",
            "--episodes",
            "5",
            "--envs-per-game",
            "3",
            "--json",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    table = json.loads(proc.stdout)
    assert [r["split"] for r in table["rows"]] == ["train", "test2"]
    assert all(r["episodes"] == 5 for r in table["rows"])
    assert json.loads(out.read_text()) == table


@pytest.mark.heavy
def test_render_writes_video_with_overlays(tiny_run, tmp_path):
    from proclab.io.video import read_video

    out = tmp_path / "agent.mp4"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "proclab",
            "render",
            "--agent",
            str(tiny_run[0]),
            "--out",
            str(out),
            "--max-steps",
            "20",
            "--human",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    frames = read_video(out)
    assert frames.shape[1:] == (512, 1024, 3) and 1 <= len(frames) <= 20


@pytest.mark.heavy
def test_plot_groups_seeds(tiny_run, tmp_path):
    out = tmp_path / "curves.png"
    proc = subprocess.run(
        [sys.executable, "-m", "proclab", "plot", *map(str, tiny_run), "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 20_000
    from proclab.rl.curves import group_runs, mean_std

    assert list(group_runs(tiny_run)) == ["ppo/bossfight/tiny"]
    _, mean, std = mean_std(
        [(np.array([0, 1, 2.0]), np.array([0, 1, 2.0])), (np.array([0, 2.0]), np.array([2, 2.0]))]
    )
    np.testing.assert_allclose(mean, [1, 1.5, 2])
    np.testing.assert_allclose(std, [1, 0.5, 0])


def test_plot_adds_the_learned_reward_panel_only_for_runs_that_logged_it(tmp_path):
    from proclab.rl.curves import LEARNED_REWARD_PANEL, PANELS, panels_for

    true_only = {"step": [0, 1], "charts/episodic_return": [1.0, 2.0]}
    learned = {**true_only, "charts/proxy_episodic_return": [-3.0, 5.0]}
    assert panels_for([true_only]) == PANELS
    panels = panels_for([true_only, learned])
    assert panels[1] == LEARNED_REWARD_PANEL and set(panels) == {*PANELS, LEARNED_REWARD_PANEL}
    run = tmp_path / "runs" / "ppo" / "starpilot" / "trex" / "0-1"
    run.mkdir(parents=True)
    (run / "metrics.csv").write_text(
        "step,charts/episodic_return,charts/proxy_episodic_return\n0,1.0,-3.0\n8,2.0,5.0\n"
    )
    from proclab.rl.curves import plot_runs

    assert plot_runs([run], tmp_path / "c.png").stat().st_size > 20_000


def test_eval_of_non_checkpoint_is_one_line(tmp_path):
    (tmp_path / "x").mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "proclab", "eval", "--agent", str(tmp_path / "x")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "not a proclab checkpoint" in proc.stderr and proc.stderr.count("\n") == 1


def test_bf16_autocast_acting_runs_on_cpu():
    rt = make_runtime("cpu", "bf16")
    agent = rt.prepare(build_agent(AgentConfig(widths=(4, 8, 8), fc=32)))
    obs = torch.randint(0, 255, (3, 3, 64, 64), dtype=torch.uint8)
    with torch.inference_mode(), rt.autocast():
        out, _ = agent.step(obs, {}, torch.ones(3, dtype=torch.bool))
    assert out.logits.shape == (3, 15) and torch.isfinite(out.logits.float()).all()


def test_random_baseline_is_a_uniform_agent_on_the_same_levels(tmp_path):
    """--random-baseline adds rows equal to a uniformly random agent evaluated on the same splits,
    episodes and seed (computed here directly)."""
    from proclab.envs import EnvConfig
    from proclab.models.scripted import ScriptedAgent
    from proclab.rl.command import EvalArgs, run_evaluation
    from proclab.rl.evaluate import evaluate
    from support import TINY_GRU, make_agent_checkpoint

    ckpt = make_agent_checkpoint(tmp_path / "run", TINY_GRU, game="bigfish")
    args = EvalArgs(agent=ckpt, split=("train", "test1"), episodes=3, seed=5, random_baseline=True)
    table = run_evaluation(args).table
    rt = make_runtime("cpu", "fp32")
    env_config = EnvConfig(game=("bigfish",), num_envs=2, use_backgrounds=False)
    torch.manual_seed(5)
    for row in table["random"]:
        direct = evaluate(
            ScriptedAgent.uniform(15), env_config, row["split"], 3, rt, envs_per_game=64, seed=5
        )
        assert row["return_mean"] == pytest.approx(np.mean(direct["bigfish"].returns))
        assert row["episodes"] == 3
    assert {r["split"] for r in table["random"]} == {"train", "test1"}


def test_eval_goals_only_when_asked(tmp_path, capsys, monkeypatch):
    """--goals adds each goal's count and exact interval to the rows (the random baseline's too) and a
    column per goal to the printed table; without it nothing is read. Two maze levels whose clocks end them
    within 30 steps keep it short."""
    from level_fixtures import ending_soon
    from proclab.envs import EnvConfig
    from proclab.levels.level import Level, write_levels
    from proclab.rl.command import EvalArgs, run_evaluation
    from proclab.stats.proportions import clopper_pearson
    from support import TINY_GRU, make_agent_checkpoint

    monkeypatch.setenv("COLUMNS", "250")  # the printed table on one line per row
    ckpt = make_agent_checkpoint(tmp_path / "run", TINY_GRU, game="maze")
    levels = [ending_soon(Level.generate("maze", seed, mode=EnvConfig().mode)) for seed in (1, 2)]
    file = write_levels(tmp_path / "levels.npz", levels)
    args = EvalArgs(
        agent=ckpt, levels_from=file, episodes=2, envs_per_game=2, random_baseline=True, goals=True
    )
    table = run_evaluation(args).table
    for row in [*table["rows"], *table["random"]]:
        assert set(row["goals"]) == {"cheese", "corner"}
        cheese = row["goals"]["cheese"]
        assert cheese["of"] == 2 and cheese["rate"] == row["level_complete_rate"]
        assert cheese["ci95"] == list(clopper_pearson(cheese["count"], 2))
    assert "corner [95% CI] n" in capsys.readouterr().out
    plain = run_evaluation(EvalArgs(agent=ckpt, levels_from=file, episodes=2, envs_per_game=2)).table
    assert "goals" not in plain["rows"][0] and "corner" not in capsys.readouterr().out
