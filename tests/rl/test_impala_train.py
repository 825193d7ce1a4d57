"""`proclab train --algo impala`: presets, a tiny multi-task run, actor restart, resume, bad input, eval table."""

import json
import os
import re
import shutil
import signal
import threading
import time
from dataclasses import replace

import pytest

from proclab.command import parse_args
from proclab.errors import ProclabError
from proclab.io.run_dirs import read_metrics
from proclab.rl.config import PRESETS, ImpalaConfig
from proclab.rl.evaluate import EvalSettings, paper_rows, protocol_settings, results_table
from support import TINY_FLAGS, one_line_error, proclab, with_game

GAMES = "bossfight,chaser"  # short random episodes
TINY = [
    "--algo",
    "impala",
    "--game",
    GAMES,
    "--num-envs",
    "4",
    "--num-actors",
    "2",
    "--batch-size",
    "4",
    "--unroll-length",
    "16",
    "--core",
    "lstm",
    "--rnn-size",
    "16",
    "--val-split",
    "val",
    "--val-num-envs",
    "2",
    *TINY_FLAGS,
]


def test_presets_reproduce_the_seed():
    for name in ("impala-procgen", "impala-multi-easy6", "impala-memory4"):
        cfg = PRESETS[name]
        cfg.validate()
        i = cfg.impala
        assert cfg.algo == "impala" and cfg.env.num_envs == 48  # 48 actors x 1 env in the seed
        assert (i.batch_size, i.unroll_length, i.total_steps, i.gamma) == (32, 50, 300_000_000, 0.99)
        assert (i.learning_rate, i.rms_alpha, i.rms_eps, i.rms_momentum, i.max_grad_norm) == (
            6e-4,
            0.99,
            0.01,
            0,
            40,
        )
        assert (i.baseline_cost, i.entropy_cost, i.rho_bar, i.c_bar, i.pg_rho_bar) == (0.5, 0.01, 1, 1, 1)
        assert (i.reward_clipping, i.reduction, i.anneal_lr) == ("abs_one", "sum", True)
        assert cfg.agent.prev_reward and cfg.agent.core == "srwm" and cfg.val_split == "val"
    easy6, memory4 = PRESETS["impala-multi-easy6"], PRESETS["impala-memory4"]
    assert easy6.env.games() == ("bigfish", "fruitbot", "maze", "leaper", "plunder", "starpilot")
    assert (easy6.env.mode, easy6.env.split) == ("easy", "train")  # 200 levels
    assert memory4.env.games() == ("dodgeball", "heist", "maze", "miner")
    assert (memory4.env.mode, memory4.env.split) == ("memory", "train-500")


def test_algo_flags_are_separate():
    cfg, _ = parse_args(
        [
            "--preset",
            "impala-multi-easy6",
            "--total-steps",
            "1000",
            "--learning-rate",
            "1e-3",
            "--num-actors",
            "6",
            "--detach-every-step",
        ]
    )
    assert cfg.algo == "impala" and cfg.impala.total_steps == 1000 and cfg.impala.learning_rate == 1e-3
    assert cfg.impala.num_actors == 6 and cfg.agent.detach_every_step
    assert cfg.ppo == PRESETS["impala-multi-easy6"].ppo  # PPO's fields of the same names are untouched
    ppo, _ = parse_args(["--total-steps", "2048"])
    assert ppo.algo == "ppo" and ppo.ppo.total_steps == 2048 and ppo.impala == ImpalaConfig()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--num-envs", "6", "--num-actors", "4"], "does not split evenly over num_actors=4"),
        (
            ["--game", "bigfish,maze,leaper", "--val-num-envs", "3"],
            "multi-task list of 3 games (bigfish, maze, leaper) does not divide",
        ),
        (["--game", "bigfish,bigfish"], "game list repeats bigfish"),
        (["--game", "easy6", "--mode", "memory", "--num-envs", "12"], "has no 'memory' mode"),
        (["--batch-size", "3"], "batch_size=3 is not a multiple of the 2 envs per actor"),
        (["--reward-clipping", "sign"], "unknown reward clipping 'sign'"),
        (["--reduction", "avg"], "unknown loss reduction 'avg'"),
        (["--total-steps", "10"], "smaller than one batch"),
    ],
)
def test_bad_impala_settings_are_refused(args, message):
    base = with_game(TINY, *args[1:2]) if args[0] == "--game" else TINY
    with pytest.raises(ProclabError, match=re.escape(message)):
        cfg, _ = parse_args([*base, *(args[2:] if args[0] == "--game" else args)])
        cfg.validate()


def test_bad_input_is_one_line_and_creates_nothing(tmp_path, capsys):
    args = [
        *with_game(TINY, "bigfish,maze,leaper"),
        "--val-num-envs",
        "3",
        "--run-root",
        str(tmp_path / "runs"),
    ]
    assert "does not divide num_envs=4" in one_line_error(capsys, ["train", *args])
    assert not (tmp_path / "runs").exists()


@pytest.fixture(scope="module")
def impala_run(tmp_path_factory):
    """10 updates of 64 steps on two games, with a validation actor; checkpoints at 320 and 640."""
    root = tmp_path_factory.mktemp("runs")
    proc = proclab(
        "train", *TINY, "--total-steps", "640", "--checkpoint-every", "320", "--run-root", str(root)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = root.glob("impala/bossfight+chaser/srwm/*")  # --algo impala starts from impala-procgen
    return run


def test_multi_task_run_logs_per_game_stats(impala_run):
    m = read_metrics(impala_run)
    assert m["step"] == [64 * (i + 1) for i in range(10)]
    for game in GAMES.split(","):
        returns = [r for r in m[f"charts/{game}/episodic_return"] if r == r]
        assert returns, f"no {game} episode reached the learner"
        assert f"charts/{game}/normalized_score" in m
    assert any(k.endswith("val_episodic_return") for k in m), "the validation actor reported no episode"
    assert set(m["charts/actor_restarts"]) == {0.0}
    assert all(0 <= lag <= 10 for lag in m["charts/policy_lag"])
    assert m["charts/learning_rate"][0] == pytest.approx(6e-4) and m["charts/learning_rate"][-1] < 1e-4
    ckpts = sorted(p.name for p in (impala_run / "checkpoints").iterdir())
    assert ckpts == ["step_000000000320", "step_000000000640"]
    meta = json.loads((impala_run / "checkpoints" / ckpts[-1] / "meta.json").read_text())
    assert meta["algo"] == "impala" and meta["games"] == GAMES.split(",")


@pytest.mark.heavy
def test_resume_restores_counters_and_schedule(impala_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(impala_run, run)
    proc = proclab("train", "--resume", str(run), "--total-steps", "960")
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = read_metrics(run)
    assert m["step"] == [64 * (i + 1) for i in range(15)]  # continues at update 11, each step logged once
    # the schedule follows the new total: update 11 (index 10) runs at 6e-4 * (1 - 640 / 960)
    assert m["charts/learning_rate"][10] == pytest.approx(2e-4, rel=1e-5)
    assert sorted(p.name for p in (run / "checkpoints").iterdir())[-1] == "step_000000000960"


def test_checkpoint_of_another_core_is_one_line(impala_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(impala_run, run)
    config = json.loads((run / "config.json").read_text())
    config["agent"]["core"] = "gru"
    (run / "config.json").write_text(json.dumps(config))
    err = one_line_error(capsys, ["train", "--resume", str(run), "--total-steps", "960"])
    assert "does not match this architecture" in err
    assert "core.0.weight_ih (64, 33) vs (48, 33)" in err  # names the mismatched keys

    ckpt = run / "checkpoints" / "step_000000000640"
    meta = json.loads((ckpt / "meta.json").read_text())
    meta["agent"]["core"] = "srwm"
    (ckpt / "meta.json").write_text(json.dumps(meta))
    assert "does not match this architecture" in one_line_error(capsys, ["eval", "--agent", str(ckpt)])


@pytest.mark.slow  # make test-all: 10 s of a killed actor process
def test_killed_actor_is_restarted_and_training_continues(tmp_path, capsys):
    from proclab.rl.impala_train import ImpalaTrainer

    cfg, _ = parse_args(
        [*TINY, "--total-steps", str(64 * 30), "--val-num-envs", "0", "--run-root", str(tmp_path)]
    )
    trainer = ImpalaTrainer(replace(cfg, tensorboard=False))
    killed = []

    def kill_actor_0():
        deadline = time.time() + 120
        while trainer.learner.updates < 2 and time.time() < deadline:
            time.sleep(0.01)
        proc = trainer.pool.procs.get(0)
        if proc is not None and proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
            killed.append(proc.pid)

    killer = threading.Thread(target=kill_actor_0)
    killer.start()
    run = trainer.train(progress=False)
    killer.join()
    assert killed, "the run ended before the actor could be killed"
    m = read_metrics(run)
    assert m["step"][-1] == 64 * 30
    assert m["charts/actor_restarts"][-1] == 1
    assert "actor 0 died (exit code -9)" in capsys.readouterr().err


def test_paper_table_has_a_row_per_game_and_the_mean_x100():
    rows = [
        {"split": s, "game": g, "return_mean": r, "normalized_score": n}
        for s, g, r, n in [
            ("train", "maze", 7.5, 0.5),
            ("train", "miner", 7.25, 0.5),
            ("test1", "maze", 5.0, 0.0),
            ("test1", "miner", 13.0, 1.0),
        ]
    ]
    table = results_table(rows, "easy")
    header, body = paper_rows(table)
    assert header == ["game", "train return", "train score", "test1 return", "test1 score"]
    assert body == [
        ["maze", "7.50", "50.0", "5.00", "0.0"],
        ["miner", "7.25", "50.0", "13.00", "100.0"],
        ["mean", "", "50.0", "", "50.0"],
    ]


def test_srwm_protocol_settings():
    args = EvalSettings(preset="srwm")
    assert protocol_settings(args) == (200, True, ("train", "test1", "test2", "test3"))
    assert protocol_settings(replace(args, preset="srwm-sampled", episodes=5, split=("test2",))) == (
        5,
        False,
        ("test2",),
    )
    assert protocol_settings(EvalSettings()) == (100, False, ("train", "held-out"))
    with pytest.raises(ProclabError, match="unknown eval preset 'srvm'"):
        protocol_settings(replace(args, preset="srvm"))


def test_eval_protocol_covers_the_seeds_splits(impala_run, tmp_path):
    # the sampled variant: a barely trained greedy policy can idle until Procgen's 1000-step limit
    out = tmp_path / "eval.json"
    args = ["--preset", "srwm-sampled", "--episodes", "1", "--envs-per-game", "1", "--out", str(out)]
    proc = proclab("eval", "--agent", str(impala_run), *args, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = json.loads(out.read_text())
    assert table["protocol"] == "srwm-sampled" and not table["greedy"]
    assert list(table["aggregate"]) == ["train", "test1", "test2", "test3"]
    assert [(r["split"], r["game"]) for r in table["rows"]] == [
        (s, g) for s in ("train", "test1", "test2", "test3") for g in GAMES.split(",")
    ]
    printed = [line.split() for line in proc.stdout.splitlines()]
    header, body = paper_rows(table)
    assert all(col in proc.stdout for col in header)
    for row in body:  # one line per game and the mean, with the numbers of the JSON results
        assert any([c for c in row if c] == [w for w in line if w != "│" and w != "┃"] for line in printed), (
            row
        )
