"""`proclab train`: presets, runs on disk, exact resume after kill -9, torchrun, errors."""

import dataclasses
import json
import math
import signal
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from proclab.command import parse_args
from proclab.errors import ProclabError
from proclab.io.checkpoint import load_checkpoint
from proclab.io.configs import from_dict, to_dict
from proclab.io.run_dirs import read_metrics
from proclab.record.recording import RewardNorm, reward_normalisation
from proclab.rl.config import PRESETS, TrainConfig
from support import (
    TINY_FLAGS,
    TINY_PPO,
    one_line_error,
    proclab,
    proclab_killed_when,
    torchrun_proclab,
    with_game,
)

TINY = [*TINY_PPO, "--val-num-envs", "2", "--device", "cpu", *TINY_FLAGS]


def only_run(root: Path) -> Path:
    runs = [p for p in root.glob("ppo/*/*/*") if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def final_weights(run: Path) -> dict[str, torch.Tensor]:
    last = sorted((run / "checkpoints").glob("step_*"))[-1]
    return load_file(str(last / "model.safetensors"))


def test_presets_are_valid_and_reproduce_the_seeds():
    for name, cfg in PRESETS.items():
        cfg.validate()
        # JSON round trip; saved paths are absolute, so a run dir is read the same from any directory
        assert from_dict(TrainConfig, to_dict(cfg)) == replace(cfg, run_root=cfg.run_root.absolute()), name
    c = PRESETS["cleanrl"]  # Procgen paper / CleanRL: anchors.md A1, A4
    assert (c.env.num_envs, c.ppo.num_steps, c.ppo.num_minibatches, c.ppo.update_epochs) == (64, 256, 8, 3)
    assert (c.ppo.learning_rate, c.ppo.gamma, c.ppo.gae_lambda, c.ppo.ent_coef, c.ppo.vf_coef) == (
        5e-4,
        0.999,
        0.95,
        0.01,
        0.5,
    )
    assert (c.ppo.clip_coef, c.ppo.max_grad_norm, c.ppo.adam_eps, c.ppo.anneal_lr) == (0.2, 0.5, 1e-5, False)
    assert c.env.mode == "easy" and c.env.split == "all" and c.agent.fc == 256 and c.agent.core == "none"
    table = {
        "easy": (64, 2048, False),
        "easy-200": (128, 2048, False),
        "hard": (256, 2048, False),
        "hard-500": (256, 8192, False),
        "hard-rec": (256, 2048, True),
        "hard-local-dev": (16, 8192, False),
        "hard-local-dev-rec": (16, 8192, True),
    }
    for name, (n_envs, chunk, rec) in table.items():  # interpreting_rl_behavior.md section 2
        p = PRESETS[name]
        assert (p.env.num_envs, p.ppo.chunk_size, p.agent.core != "none") == (n_envs, chunk, rec), name
        assert p.ppo.anneal_lr and not p.env.use_backgrounds and p.ppo.update_epochs == 3
    assert PRESETS["hard-rec"].agent.fc == 64 and PRESETS["hard-rec"].agent.rnn_size == 64
    rec, tiny = PRESETS["tiny-rec"], PRESETS["tiny"]  # tiny's scale with the seed's GRU agent on coinrun
    assert rec.agent == PRESETS["hard-rec"].agent and rec.env.game == ("coinrun",) and rec.ppo == tiny.ppo


def test_flags_override_preset_fields():
    cfg, resume = parse_args(
        ["--preset", "hard-rec", "--game", "maze", "--learning-rate", "1e-3", "--core", "lstm"]
    )
    assert resume is None
    assert cfg.env.game == ("maze",) and cfg.ppo.learning_rate == 1e-3 and cfg.agent.core == "lstm"
    assert cfg.env.num_envs == 256  # untouched preset field


@pytest.mark.slow  # make test-all: 9 s; multi-task runs are trained by IMPALA's default test
def test_multitask_run_logs_per_game_curves(tmp_path):
    proc = proclab(
        "train",
        *with_game(TINY, "bossfight", "dodgeball"),
        "--total-steps",
        "768",
        "--run-root",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    run = next(tmp_path.glob("ppo/bossfight+dodgeball/tiny/*"))
    columns = read_metrics(run)
    for game in ("bossfight", "dodgeball"):
        assert f"charts/{game}/episodic_return" in columns
        assert f"charts/{game}/val_episodic_return" in columns
    assert "charts/normalized_score" in columns


def test_checkpoints_carry_the_reward_normalisation(tmp_path):
    """Readers find the reward scale in the checkpoint's metadata, equal to the trainer's saved statistics."""
    proc = proclab("train", *TINY, "--total-steps", "256", "--run-root", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    ckpt = load_checkpoint(only_run(tmp_path), kind="agent", train_state=True)
    norm = ckpt.meta["reward_normalisation"]
    var = ckpt.train_state["ranks"][0]["actor"]["env"]["reward_rms"]["var"]
    assert norm["scale"] == math.sqrt(var + 1e-8) and norm["clip"] == PRESETS["tiny"].ppo.reward_clip
    legacy = dataclasses.replace(
        ckpt, meta={k: v for k, v in ckpt.meta.items() if k != "reward_normalisation"}
    )
    assert reward_normalisation(ckpt) == RewardNorm(**norm)
    assert reward_normalisation(legacy).scale == norm["scale"]  # a checkpoint written before, from its state


@pytest.mark.heavy
def test_killed_run_resumes_to_identical_weights(tmp_path):
    """A run killed with SIGKILL and resumed ends with exactly the weights of an uninterrupted run."""
    args = [*TINY, "--total-steps", str(4 * 32 * 8), "--checkpoint-every", "128"]
    full = proclab("train", *args, "--run-root", str(tmp_path / "a"))
    assert full.returncode == 0, full.stderr

    step = "b/ppo/*/*/*/checkpoints/step_000000000384"
    proc = proclab_killed_when(step, tmp_path, "train", *args, "--run-root", str(tmp_path / "b"))
    assert proc.returncode == -signal.SIGKILL
    run = only_run(tmp_path / "b")
    assert not (run / "checkpoints" / f"step_{4 * 32 * 8:012d}").exists(), "run finished before the kill"

    resumed = proclab("train", "--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr
    a, b = final_weights(only_run(tmp_path / "a")), final_weights(run)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    steps = read_metrics(run)["step"]
    assert steps == sorted(set(steps)) and steps[-1] == 4 * 32 * 8  # each update logged exactly once
    assert (
        read_metrics(run)["charts/episodic_return"][-1]
        == read_metrics(only_run(tmp_path / "a"))["charts/episodic_return"][-1]
    )


@pytest.mark.distributed  # two processes of a full trainer each: make test-all
def test_torchrun_two_cpu_processes(tmp_path):
    proc = torchrun_proclab(
        "train", *TINY, "--total-steps", "512", "--run-root", str(tmp_path), "--device", "cpu"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]  # includes the end-of-run check that replicas agree
    run = only_run(tmp_path)
    assert final_weights(run)
    assert read_metrics(run)["step"][-1] == 512


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "tinyy"], "unknown preset 'tinyy'. Did you mean 'tiny'"),
        ([*TINY, "--total-steps", "100"], "smaller than one rollout"),
        (with_game(TINY, "coinrn"), "Did you mean 'coinrun'"),
        ([*TINY, "--val-split", "100:50"], "overlaps training split"),
        ([*TINY, "--num-envs", "0"], "num_envs=0"),
        ([*TINY, "--learner-layout", "64:threads"], "invalid learner layout '64:threads'"),
    ],
)
def test_bad_input_is_one_line_and_creates_nothing(tmp_path, capsys, args, message):
    assert message in one_line_error(capsys, ["train", *args, "--run-root", str(tmp_path / "runs")])
    assert not (tmp_path / "runs").exists()


def test_minibatches_split_evenly_and_modes_are_checked():
    tiny, rec = PRESETS["tiny"], PRESETS["hard-local-dev-rec"]
    with pytest.raises(ProclabError, match=r"num_minibatches=3 does not divide the 2048 samples per process"):
        replace(tiny, ppo=replace(tiny.ppo, num_minibatches=3)).validate()
    with pytest.raises(ProclabError, match=r"num_minibatches=3 does not divide the 16 envs per process"):
        replace(rec, ppo=replace(rec.ppo, num_minibatches=3)).validate()  # a GRU: groups of whole sequences
    with pytest.raises(ProclabError, match=r"num_minibatches=16 does not divide the 8 envs per process"):
        replace(rec, ppo=replace(rec.ppo, num_minibatches=16)).validate(world=2)
    with pytest.raises(ProclabError, match="unknown norm_adv_scope 'batch'"):
        replace(tiny, ppo=replace(tiny.ppo, norm_adv_scope="batch")).validate()
    with pytest.raises(ProclabError, match="unknown replay_reset 'last'"):
        replace(tiny, ppo=replace(tiny.ppo, replay_reset="last")).validate()


def test_resume_errors(tmp_path, capsys):
    assert "is not a run directory" in one_line_error(
        capsys, ["train", "--resume", str(tmp_path / "missing")]
    )
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(to_dict(PRESETS["tiny"])))
    assert "has no checkpoint yet" in one_line_error(capsys, ["train", "--resume", str(run)])
    err = one_line_error(capsys, ["train", "--resume", str(run), "--learning-rate", "1"])
    assert "only --total-steps may change" in err


def test_resume_of_a_finished_run_does_nothing_and_more_steps_are_recorded(tmp_path, capsys):
    """--resume of a finished run trains nothing (exit 0, one line); --total-steps N extends it, and
    the change is written to config.json and config_history.jsonl."""
    from proclab.cli import main

    main(["train", *TINY, "--total-steps", "256", "--run-root", str(tmp_path)])
    run = only_run(tmp_path)
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    metrics = (run / "metrics.csv").read_text()
    capsys.readouterr()
    main(["train", "--resume", str(run)])
    out = capsys.readouterr().out
    assert "already finished" in out and out.count("\n") == 1, out
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before
    assert (run / "metrics.csv").read_text() == metrics

    main(["train", "--resume", str(run), "--total-steps", "384"])
    assert load_checkpoint(run, kind="agent").step == 384 and read_metrics(run)["step"] == [128, 256, 384]
    saved = from_dict(TrainConfig, json.loads((run / "config.json").read_text()))
    assert saved.ppo.total_steps == 384
    (entry,) = [json.loads(line) for line in (run / "config_history.jsonl").read_text().splitlines()]
    assert entry["resumed_at_step"] == 256 and entry["changed"] == {"ppo.total_steps": [256, 384]}
    capsys.readouterr()
    main(["train", "--resume", str(run)])  # finished again, at its new end
    assert "already finished (last checkpoint at 384 of 384)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--resume", str(run), "--total-steps", "300"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "does not go beyond the run's last checkpoint at 384" in err, err


def test_a_repeated_game_option_is_refused(tmp_path, capsys):
    """`--game A --game B` would silently train on B alone; a game twice in one list is refused too."""
    for args, message in [
        ([*with_game(TINY, "starpilot"), "--game", "starpilot"], "--game is given more than once"),
        ([*with_game(TINY, "starpilot"), "--game", "coinrun"], "--game is given more than once"),
        (with_game(TINY, "starpilot", "starpilot"), "game list repeats starpilot"),
        (with_game(TINY, "starpilot,coinrun,starpilot"), "game list repeats starpilot"),
    ]:
        assert message in one_line_error(
            capsys, ["train", *args, "--total-steps", "128", "--run-root", str(tmp_path / "r")]
        )
    assert not (tmp_path / "r").exists()


def test_resume_takes_a_new_time_limit_for_its_session(tmp_path, capsys):
    """A run stopped by --time-limit resumes under another limit (a job slot of another length); no other
    flag may change."""
    from proclab.cli import main

    main(["train", *TINY, "--total-steps", "256", "--time-limit", "1e-9", "--run-root", str(tmp_path)])
    run = only_run(tmp_path)
    assert load_checkpoint(run, kind="agent").step == 128  # stopped after its first update
    main(["train", "--resume", str(run), "--time-limit", "0"])
    assert load_checkpoint(run, kind="agent").step == 256
    assert from_dict(TrainConfig, json.loads((run / "config.json").read_text())).time_limit == 0


def test_a_run_initialised_from_an_agent_starts_from_its_weights_and_architecture(tmp_path, capsys):
    """``--init-from``: fine-tuning. The new run's agent is the source's, weight for weight, whatever agent
    settings its flags gave (config.json records the source's); an unknown source is one line."""
    from proclab.models.loading import load
    from proclab.rl.ppo_train import Trainer

    assert proclab("train", *TINY, "--total-steps", "128", "--run-root", str(tmp_path / "a")).returncode == 0
    source = load(only_run(tmp_path / "a"), device="cpu")
    config, _ = parse_args([*TINY, "--widths", "8", "8", "8", "--run-root", str(tmp_path / "b"),
                            "--init-from", str(only_run(tmp_path / "a"))])  # fmt: skip
    assert config.agent != source.config
    trainer = Trainer(config)
    try:
        assert trainer.config.agent == source.config
        got, want = trainer.agent.state_dict(), source.state_dict()
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
        saved = json.loads((trainer.run_dir / "config.json").read_text())
        assert saved["agent"]["widths"] == list(source.config.widths) and saved["init_from"]
    finally:
        trainer.close()
    error = one_line_error(
        capsys, ["train", *TINY, "--run-root", str(tmp_path / "c"), "--init-from", "nowhere"]
    )
    assert "unknown agent" in error and not (tmp_path / "c").exists()
