"""`proclab trex train`, `grid`, `plot` and `demo-video` on a small synthetic demo store; bad input."""

import csv
import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from proclab.cli import main as proclab
from proclab.io.video import read_video
from proclab.reward.command import parse_args
from proclab.reward.grid import GridSettings, grid_configs, run_grid
from proclab.reward.nets import load_reward_model
from proclab.reward.plots import correlation_table, plot_correlations, plot_predictions
from proclab.reward.record_demos import write_synthetic_demos
from proclab.reward.train import LOG_COLUMNS, SEED_SUMMARY, SUMMARY_COLUMNS, TrexConfig
from proclab.run.runtime import make_runtime
from proclab.store import EpisodeStore

FAST = [
    "--arch",
    "atari",
    "--num-pairs",
    "400",
    "--val-pairs",
    "100",
    "--test-pairs",
    "100",
    "--epoch-pairs",
    "64",
    "--eval-pairs",
    "100",
    "--max-epochs",
    "3",
    "--batch-size",
    "32",
    "--torch-threads",
    "1",
]
FAST_CONFIG = parse_args(FAST)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return write_synthetic_demos(tmp_path_factory.mktemp("demos") / "store", num_train=12, num_test=8)


def rows_of(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_train_writes_log_model_and_summary(store, tmp_path, capsys):
    proclab(["trex", "train", "--data", str(store), "--num-demos", "10", "--run-root", str(tmp_path), *FAST])
    out = capsys.readouterr().out
    assert "+1/step baseline" in out and "reward model:" in out
    (summary,) = rows_of(tmp_path / "trex" / "rm_infos.csv")
    assert list(summary) == list(SUMMARY_COLUMNS) and set(SEED_SUMMARY) <= set(summary)
    assert (summary["method"], summary["env_name"], summary["num_dems"], summary["test_demos"]) == (
        "trex",
        "starpilot",
        "10",
        "8",
    )
    for key in ("val_acc", "test_acc", "gt_test_acc", "test_acc_uniform", "gt_test_acc_uniform"):
        assert 0 <= float(summary[key]) <= 1
    # the step index as a reward: on progress-heuristic pairs it never loses a pair (the better clip never
    # starts earlier), on uniform-start pairs it does
    assert float(summary["progress_test_acc"]) >= 0.5
    assert 0 <= float(summary["progress_test_acc_uniform"]) < float(summary["progress_test_acc"])
    assert "own ceiling" not in out and "uniform-start pairs" in out
    for key in ("spearman", "pearson", "baseline_spearman", "baseline_pearson"):
        assert -1 <= float(summary[key]) <= 1
    run = tmp_path / "trex" / "starpilot" / "default"
    (run_dir,) = run.iterdir()
    log = rows_of(run_dir / "train_log.csv")
    assert list(log[0]) == list(LOG_COLUMNS) and 1 <= len(log) <= 3
    assert [int(r["n_train_samples"]) for r in log] == [64 * (i + 1) for i in range(len(log))]
    net, ckpt = load_reward_model(run_dir)
    assert net.config.arch == "atari" and ckpt.meta["game"] == "starpilot"
    assert ckpt.step == int(summary["best_epoch"])

    plot = plot_predictions(run_dir, tmp_path / "plots", make_runtime("cpu", "fp32"), min_length=40, panels=4)
    assert plot.stat().st_size > 10_000


def test_the_parity_preset_switches_to_the_seed_defaults():
    cfg = parse_args(["--preset", "parity"])
    assert (cfg.batch_size, cfg.lr, cfg.net.scale_input, cfg.precision, cfg.epoch_test_metrics) == (
        1,
        5e-5,
        False,
        "fp32",
        True,
    )
    assert (cfg.weight_decay, cfg.lam_l1, cfg.epoch_pairs, cfg.patience, cfg.max_epochs, cfg.num_pairs) == (
        0.01,
        1e-3,
        1000,
        10,
        50,
        50_000,
    )
    assert (cfg.min_clip_len, cfg.max_clip_len, cfg.stride, cfg.net.arch) == (20, 100, 1, "seed")
    assert parse_args(["--preset", "parity", "--lr", "1e-4"]).lr == 1e-4 and parse_args([]).batch_size > 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["--num-demos", "13"], "asked for 13 demos but only 12"),
        (["--game", "coinrun"], "holds no coinrun demos"),
        (["--data", "CONSTANT"], "same return"),
        (["--data", "MISSING"], "does not exist"),
    ],
)
def test_bad_input_is_one_line_exit_2(store, tmp_path, capsys, args, message):
    constant = (
        write_synthetic_demos(tmp_path / "constant", 6, 2, constant_return=True)
        if "CONSTANT" in args
        else None
    )
    args = [
        str(constant) if a == "CONSTANT" else str(tmp_path / "nope") if a == "MISSING" else a for a in args
    ]
    with pytest.raises(SystemExit) as exc:
        proclab(["trex", "train", "--data", str(store), "--run-root", str(tmp_path), *FAST, *args])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and message in err, err


@pytest.mark.slow  # make test-all: 10 s of a grid of T-REX runs
def test_grid_csv_has_one_row_per_cell(store, tmp_path):
    args = GridSettings(
        replace(FAST_CONFIG, demos=store, run_root=tmp_path),
        num_demos=(6, 8),
        seeds=2,
        out=tmp_path / "grid.csv",
    )
    rows = run_grid(args)
    written = rows_of(tmp_path / "grid.csv")
    assert len(rows) == len(written) == 4 and list(written[0]) == list(SUMMARY_COLUMNS)
    assert sorted((int(r["num_dems"]), int(r["seed"])) for r in written) == [(6, 0), (6, 1), (8, 0), (8, 1)]
    assert len({r["run_dir"] for r in written}) == 4
    assert run_grid(args) == []  # every cell has its row: a rerun trains nothing
    more = run_grid(replace(args, num_demos=(6,), seeds=3))  # only the new cell
    assert [(int(r["num_dems"]), int(r["seed"])) for r in more] == [(6, 2)]
    written = [r for r in rows_of(tmp_path / "grid.csv") if r["seed"] != "2"]

    table = correlation_table(written)["starpilot"]
    sp = [float(r["spearman"]) for r in written if r["num_dems"] == "6"]
    assert table[6]["spearman"] == pytest.approx((np.mean(sp), np.std(sp), 2))
    (png,) = plot_correlations(written, tmp_path / "plots")
    assert png.name == "correlations_starpilot.png" and png.stat().st_size > 10_000

    with pytest.raises(Exception, match="needs that many starpilot training demos"):
        run_grid(GridSettings(TrexConfig(demos=store), num_demos=(6, 40), out=tmp_path / "never.csv"))
    assert not (tmp_path / "never.csv").exists()


def test_grid_keeps_parity_runs_apart_from_batched_ones(store):
    args = GridSettings(TrexConfig(demos=store), num_demos=(6, 8), seeds=2)
    assert {c.name for c in grid_configs(args)} == {"grid-n6", "grid-n8"}
    parity = replace(args, train=replace(args.train, parity=True))
    assert {c.name for c in grid_configs(parity)} == {"grid-n6-parity", "grid-n8-parity"}


@pytest.mark.distributed
def test_grid_runs_in_local_processes(store, tmp_path):
    train = replace(FAST_CONFIG, demos=store, run_root=tmp_path)
    rows = run_grid(GridSettings(train, num_demos=(6,), seeds=2, workers=2, out=tmp_path / "g.csv"))
    assert sorted(int(r["seed"]) for r in rows) == [0, 1]


@pytest.mark.distributed
def test_grid_cells_run_as_ray_tasks_from_ray_address_with_the_local_rows(
    ray_cluster, store, tmp_path, monkeypatch
):
    """The cells as Ray tasks on the two-node cluster named by RAY_ADDRESS alone (as a population and a sweep
    read it): the same rows, cell for cell, as the grid run in this process."""
    train = replace(FAST_CONFIG, demos=store, run_root=tmp_path, torch_threads=1)
    local = run_grid(GridSettings(train, num_demos=(6,), seeds=2, out=tmp_path / "local.csv"))
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster.address)
    ray_rows = run_grid(GridSettings(train, num_demos=(6,), seeds=2, out=tmp_path / "ray.csv"))

    def by_seed(rows):
        return {int(r["seed"]): float(r["spearman"]) for r in rows}

    assert by_seed(ray_rows) == by_seed(local) and len(local) == 2


def test_demo_video(store, tmp_path, capsys):
    out = tmp_path / "demo.mp4"
    proclab(["trex", "demo-video", "0_000_000_003", "--data", str(store), "--out", str(out), "--scale", "2"])
    assert "return" in capsys.readouterr().out
    frames = read_video(out)
    assert len(frames) == EpisodeStore(store).episodes["length"][3] and frames.shape[1:] == (128, 128, 3)


@pytest.mark.heavy
def test_resume_continues_exactly_and_a_finished_run_stays_finished(store, tmp_path, capsys):
    """A run of 3 epochs resumed with --max-epochs 4 ends with the weights of an uninterrupted run of 4;
    --resume of a finished run does nothing; the extension is recorded in the run's config history."""
    import json

    from safetensors.torch import load_file

    def run_dir(root):
        (run,) = (root / "trex" / "starpilot" / "default").iterdir()
        return run

    base = ["trex", "train", "--data", str(store), "--num-demos", "10", *FAST]
    proclab([*base, "--run-root", str(tmp_path / "a")])
    proclab([*base, "--run-root", str(tmp_path / "b"), "--max-epochs", "4"])
    a, b = run_dir(tmp_path / "a"), run_dir(tmp_path / "b")
    capsys.readouterr()
    proclab(["trex", "train", "--resume", str(a)])
    out = capsys.readouterr().out
    assert "already finished (last checkpoint at 3 of 3)" in out and out.count("\n") == 1, out

    proclab(["trex", "train", "--resume", str(a), "--max-epochs", "4"])
    for name in ("progress", "checkpoints/best"):
        wa, wb = (
            load_file(str(a / name / "model.safetensors")),
            load_file(str(b / name / "model.safetensors")),
        )
        assert all(torch.equal(wa[k], wb[k]) for k in wb), name
    assert [r["epoch"] for r in rows_of(a / "train_log.csv")] == ["1", "2", "3", "4"]
    assert [r["val_acc"] for r in rows_of(a / "train_log.csv")] == [
        r["val_acc"] for r in rows_of(b / "train_log.csv")
    ]
    (entry,) = [json.loads(line) for line in (a / "config_history.jsonl").read_text().splitlines()]
    assert entry["changed"] == {"max_epochs": [3, 4]} and entry["resumed_at_step"] == 3

    meta = json.loads(
        (a / "progress" / "meta.json").read_text()
    )  # as if it had stopped early at epoch 4 of 6
    (a / "progress" / "meta.json").write_text(
        json.dumps({**meta, "finished": "no better validation accuracy"})
    )
    config = json.loads((a / "config.json").read_text())
    (a / "config.json").write_text(json.dumps({**config, "max_epochs": 6}))
    capsys.readouterr()
    proclab(["trex", "train", "--resume", str(a)])
    assert "already finished (last checkpoint at 4 of 6)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        proclab(["trex", "train", "--resume", str(a), "--max-epochs", "9"])
    assert exit_.value.code == 2 and "stopped on its own at 4" in capsys.readouterr().err


def test_a_full_disk_at_an_epoch_checkpoint_is_one_line_and_resume_continues(store, tmp_path, capsys):
    from support import disk_full

    base = ["trex", "train", "--data", str(store), "--num-demos", "10", *FAST, "--run-root", str(tmp_path)]
    proclab([*base, "--max-epochs", "1"])
    (run,) = (tmp_path / "trex" / "starpilot" / "default").iterdir()
    capsys.readouterr()
    with disk_full(run, match=".progress.tmp-"), pytest.raises(SystemExit) as exit_:
        proclab(["trex", "train", "--resume", str(run), "--max-epochs", "2"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "cannot write checkpoint" in err, err
    assert [p.name for p in run.iterdir() if ".tmp-" in p.name] == []
    proclab(["trex", "train", "--resume", str(run)])
    assert [r["epoch"] for r in rows_of(run / "train_log.csv")] == ["1", "2"]


def test_summary_and_evaluate_report_the_length_control(store, tmp_path, capsys):
    proclab(["trex", "train", "--data", str(store), "--num-demos", "8", "--run-root", str(tmp_path), *FAST])
    (summary,) = rows_of(tmp_path / "trex" / "rm_infos.csv")
    assert float(summary["wall_seconds"]) >= float(summary["train_seconds"]) > 0
    for key in ("spearman", "partial_spearman", "binned_spearman", "baseline_spearman", "spearman_gain"):
        lo, hi = float(summary[f"{key}_lo"]), float(summary[f"{key}_hi"])
        assert (-2 <= lo <= hi <= 2) or np.isnan(float(summary[key])), key  # NaN: undefined on 8 demos
    run_dir = summary["run_dir"]
    capsys.readouterr()
    proclab(
        [
            "trex",
            "evaluate",
            "--reward-model",
            run_dir,
            "--bootstrap",
            "50",
            "--out",
            str(tmp_path / "c.json"),
        ]
    )
    assert "partial Spearman given length" in capsys.readouterr().out
    (report,) = json.loads((tmp_path / "c.json").read_text())
    # the same model on the same held-out demos, scored demo by demo instead of in one batch
    for key in (
        "spearman",
        "baseline_spearman",
        "partial_spearman",
        "binned_spearman",
        "binned_gain",
        "checkpoint_partial_spearman",
    ):
        assert report[key] == pytest.approx(float(summary[key]), abs=1e-4, nan_ok=True), key
    assert report["control_demos"] == int(summary["test_demos"])

    with pytest.raises(SystemExit) as exc:  # never overwrites a report
        proclab(["trex", "evaluate", "--reward-model", run_dir, "--out", str(tmp_path / "c.json")])
    assert exc.value.code == 2 and "exists" in capsys.readouterr().err

    old = tmp_path / "old.csv"
    old.write_text("rm_id,spearman\nx,0.5\n")
    with pytest.raises(SystemExit) as exc:  # rows are never appended under another header
        proclab(
            [
                "trex",
                "train",
                "--data",
                str(store),
                "--num-demos",
                "8",
                "--run-root",
                str(tmp_path),
                "--summary",
                str(old),
                *FAST,
            ]
        )
    assert exc.value.code == 2 and "other columns" in capsys.readouterr().err
