"""`proclab train --reward-model`: PPO on a learned reward logs the true return beside the learned one."""

import json

import pytest
import torch

from proclab.cli import main as proclab
from proclab.command import parse_learned_reward as parse_args
from proclab.errors import ProclabError
from proclab.io.run_dirs import read_metrics
from proclab.reward.nets import RewardNet, RewardNetConfig, save_reward_model
from support import TINY_FLAGS, TINY_PPO

TINY = [*TINY_PPO, "--val-num-envs", "2", "--total-steps", "512", *TINY_FLAGS]


def reward_model(path, game):
    torch.manual_seed(0)
    return save_reward_model(
        path, RewardNet(RewardNetConfig(arch="atari")), {"game": game, "mode": "easy", "step": 1}
    )


def test_train_policy_logs_true_and_proxy_returns(tmp_path, capsys):
    rm = reward_model(tmp_path / "rm" / "checkpoints" / "best", "dodgeball")
    proclab(
        [
            "train",
            "--reward-model",
            str(tmp_path / "rm"),
            "--sigmoid",
            *TINY,
            "--run-root",
            str(tmp_path / "runs"),
        ]
    )
    assert "learned-reward return" in capsys.readouterr().out
    (run,) = (tmp_path / "runs" / "ppo" / "dodgeball" / "trex").iterdir()
    saved = json.loads((run / "config.json").read_text())  # the reward settings are config fields
    assert (saved["reward_model"], saved["sigmoid"]) == (str(rm.parents[1]), True)
    metrics = read_metrics(run)
    proxy, true = metrics["charts/proxy_episodic_return"], metrics["charts/episodic_return"]
    finished = [i for i, v in enumerate(proxy) if v == v]
    assert finished and all(
        0 <= proxy[i] <= metrics["charts/episodic_length"][i] for i in finished
    )  # sigmoid
    assert all(true[i] == true[i] for i in finished)  # the true return is logged on the same rows
    assert "charts/val_episodic_return" in metrics

    config, resume = parse_args(["--resume", str(run), "--total-steps", "1024"])  # --resume uses them again
    assert (resume, config.reward_model, config.sigmoid, config.ppo.total_steps) == (
        run,
        rm.parents[1],
        True,
        1024,
    )
    with pytest.raises(ProclabError, match="drop --sigmoid"):
        parse_args(["--resume", str(run), "--sigmoid"])
    (run / "config.json").write_text(json.dumps({k: v for k, v in saved.items() if k != "reward_model"}))
    with pytest.raises(ProclabError, match="no reward_model in its config"):
        parse_args(["--resume", str(run)])


def test_reward_model_of_another_game_is_refused(tmp_path, capsys):
    reward_model(tmp_path / "rm" / "checkpoints" / "best", "coinrun")
    with pytest.raises(SystemExit) as exc:
        proclab(
            [
                "train",
                "--reward-model",
                str(tmp_path / "rm"),
                *TINY,
                "--run-root",
                str(tmp_path),
            ]
        )
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "learned on coinrun" in err


def test_resume_of_a_finished_run_does_nothing_and_more_steps_are_recorded(tmp_path, capsys):
    reward_model(tmp_path / "rm" / "checkpoints" / "best", "dodgeball")
    args = ["--reward-model", str(tmp_path / "rm"), *TINY, "--total-steps", "256"]
    proclab(["train", *args, "--run-root", str(tmp_path / "runs")])
    (run,) = (tmp_path / "runs" / "ppo" / "dodgeball" / "trex").iterdir()
    capsys.readouterr()
    proclab(["train", "--resume", str(run)])  # a run on a learned reward, known by its config.json
    out = capsys.readouterr().out
    assert "already finished (last checkpoint at 256 of 256)" in out and out.count("\n") == 1, out
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["step_000000000256"]
    proclab(["train", "--resume", str(run), "--total-steps", "384"])
    assert read_metrics(run)["step"] == [128, 256, 384]
    (entry,) = [json.loads(line) for line in (run / "config_history.jsonl").read_text().splitlines()]
    assert entry["changed"] == {"ppo.total_steps": [256, 384]}


def test_a_learned_reward_trains_ppo_only_and_sigmoid_needs_one(tmp_path, capsys):
    reward_model(tmp_path / "rm" / "checkpoints" / "best", "dodgeball")
    for argv, message in (
        (["--reward-model", str(tmp_path / "rm"), "--algo", "impala"], "--reward-model trains with PPO"),
        (["--sigmoid", *TINY], "give --reward-model REWARD_MODEL too"),
    ):
        with pytest.raises(SystemExit) as exc:
            proclab(["train", *argv, "--run-root", str(tmp_path / "runs")])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.heavy
def test_per_step_reward_pays_one_per_step_and_resumes(tmp_path, capsys):
    proclab(["train", "--reward-model", "per-step", *TINY, "--run-root", str(tmp_path / "runs")])
    (run,) = (tmp_path / "runs" / "ppo" / "dodgeball" / "trex").iterdir()
    metrics = read_metrics(run)
    proxy, length = metrics["charts/proxy_episodic_return"], metrics["charts/episodic_length"]
    finished = [i for i, v in enumerate(proxy) if v == v]
    assert finished and all(proxy[i] == pytest.approx(length[i]) for i in finished)  # return = length
    proclab(["train", "--resume", str(run), "--total-steps", "1024"])  # resumes on the same reward
    assert read_metrics(run)["step"][-1] == 1024 and "learned-reward return" in capsys.readouterr().out
