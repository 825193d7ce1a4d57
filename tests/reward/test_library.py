"""T-REX as a library: trex_demos, train_trex and evaluate_trex, each against what the commands write or an
independent computation."""

import csv
import json

import numpy as np
import pytest

from proclab.cli import main as proclab
from proclab.errors import ProclabError
from proclab.io.results import Result
from proclab.reward import RewardModel, TrexEvaluation, TrexEvaluationSettings, evaluate_trex
from proclab.reward.control import length_control
from proclab.reward.nets import RewardNetConfig, predict_rewards
from proclab.reward.record_demos import record_demos, trex_demos, write_synthetic_demos
from proclab.reward.train import TrexConfig, train_trex
from proclab.run.runtime import make_runtime
from proclab.store import EpisodeStore
from support import make_agent_checkpoint, round_trip

CPU = make_runtime("cpu", "fp32")

FAST = {"num_pairs": 400, "val_pairs": 100, "test_pairs": 100, "epoch_pairs": 64, "eval_pairs": 100,
        "max_epochs": 3, "batch_size": 32, "torch_threads": 1}  # fmt: skip
"""A few seconds of training: the same run as a config and as ``trex train`` flags."""
FAST_CONFIG = TrexConfig(net=RewardNetConfig(arch="atari"), **FAST)
FAST_FLAGS = ["--arch", "atari", *(a for k, v in FAST.items() for a in (f"--{k.replace('_', '-')}", str(v)))]
VOLATILE = ("rm_id", "run_dir", "train_seconds", "wall_seconds")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return write_synthetic_demos(tmp_path_factory.mktemp("demos") / "store", num_train=12, num_test=8)


def test_trex_demos_records_each_split_as_trex_demos_does(tmp_path):
    run_dir = make_agent_checkpoint(tmp_path / "agent").parents[1]
    demos = trex_demos([run_dir], out=tmp_path / "lib", train=4, test=3, max_len=20, num_envs=2, seed=5,
                       runtime=CPU, progress=False)  # fmt: skip
    for split, num, seed in (("train", 4, 5), ("test", 3, 6)):
        record_demos([run_dir], tmp_path / "cmd", num, split, max_len=20, num_envs=2, seed=seed, runtime=CPU,
                     progress=False)  # fmt: skip
    assert isinstance(demos, EpisodeStore)
    by_command = EpisodeStore(tmp_path / "cmd")
    assert list(demos.episodes["split"]) == ["train"] * 4 + ["test"] * 3
    for key in ("demo_id", "level_seed", "return", "length", "checkpoint_step"):
        np.testing.assert_array_equal(demos.episodes[key], by_command.episodes[key], err_msg=key)
    for e in range(7):
        np.testing.assert_array_equal(demos.read(e, ["obs"])["obs"], by_command.read(e, ["obs"])["obs"])
    with pytest.raises(ProclabError, match="at least one demo"):
        trex_demos([run_dir], out=tmp_path / "none", train=0, test=0)


def test_train_trex_is_trex_train(store, tmp_path):
    cli_root, lib_root = tmp_path / "cli", tmp_path / "lib"
    proclab(
        ["trex", "train", "--data", str(store), "--num-demos", "8", "--run-root", str(cli_root), *FAST_FLAGS]
    )
    with open(cli_root / "trex" / "rm_infos.csv", newline="") as f:
        (row,) = csv.DictReader(f)
    model = train_trex(store, FAST_CONFIG, num_demos=8, run_root=lib_root, progress=False)
    assert isinstance(model, RewardModel) and model.game == "starpilot"
    for key, value in row.items():
        if key not in VOLATILE:
            assert str(model.summary[key]) == value, key
    frames = EpisodeStore(store).read(0, ["obs"])["obs"]
    np.testing.assert_array_equal(
        model.rewards(frames), predict_rewards(RewardModel.load(row["run_dir"]).net, frames, model.runtime)
    )
    with pytest.raises(ProclabError, match="TrexConfig has no field num_demo"):
        train_trex(store, num_demo=8)


def test_evaluate_trex_is_the_length_control_of_each_demos_summed_reward(store, tmp_path):
    model = train_trex(store, FAST_CONFIG, num_demos=8, run_root=tmp_path, progress=False)
    settings = TrexEvaluationSettings(bootstrap=50, length_bins=2, min_bin=2)
    evaluation = evaluate_trex(model, settings=settings, progress=False)
    assert isinstance(evaluation, TrexEvaluation) and isinstance(evaluation, Result)
    # independently: each test demo's frames through the net, summed; the control on those sums
    data = EpisodeStore(store)
    test = np.flatnonzero(data.episodes["split"] == "test")
    predicted = [
        predict_rewards(model.net, data.read(int(e), ["obs"])["obs"], model.runtime).astype(np.float64).sum()
        for e in test
    ]
    np.testing.assert_allclose(evaluation.predicted, predicted, rtol=1e-6)
    expected = length_control(
        predicted, data.episodes["return"][test], data.episodes["length"][test], 2, 2, 50, 0
    )
    report = evaluation.report()
    assert list(report) == ["reward_model", "demos", "game", "split", *expected]
    for key, value in expected.items():
        assert report[key] == pytest.approx(value, nan_ok=True), key
    # and the command's JSON report holds the same numbers
    out = tmp_path / "report.json"
    proclab(["trex", "evaluate", "--reward-model", str(model.path), "--bootstrap", "50", "--length-bins", "2",
             "--min-bin", "2", "--out", str(out)])  # fmt: skip
    (written,) = json.loads(out.read_text())
    assert written == json.loads(json.dumps(report))
    assert [r["statistic"] for r in evaluation.table()][:2] == ["Spearman", "baseline Spearman"]
    assert len(evaluation.plot().axes) == 3  # the scatter, its colour bar, the statistics
    round_trip(evaluation, tmp_path / "evaluation")
    with pytest.raises(ProclabError, match="--split must be train or test"):
        evaluate_trex(model, settings=TrexEvaluationSettings(split="val"))
