"""`proclab analyze` under a full disk, with damaged inputs, and killed with SIGKILL mid-command.

The guarantees (docs/reliability.md): a command that fails leaves the previous complete outputs of
the folder exactly as they were and no staging folder; a damaged artefact is one line naming it;
a command killed at any point leaves either the previous run's outputs (still recorded) or none
recorded, and running it again gives exactly the outputs of an uninterrupted run.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from proclab.cli import main
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.workspace.folder import Workspace
from proclab.io.checkpoint import load_checkpoint
from support import disk_full, one_line_error, proclab_killed_at_write

SMALL = ["--n-ics", "4", "--clusters", "4", "--nmf", "3", "--perplexity", "10", "--fit-points", "150"]
BEHAVIOURS = ["--clusters", "3", "--pcs", "8", "--perplexity", "10", "--videos", "1", "--no-stability"]
TIMING = {"wall_seconds", "seconds", "finished", "time", "created"}


def analyze(*args) -> None:
    main(["analyze", *map(str, args)])


@pytest.fixture(scope="module")
def folder(gru_store, sample_store, tmp_path_factory) -> Path:
    """hidden (with samples) and behaviours, complete."""
    out = tmp_path_factory.mktemp("reliable") / "A"
    analyze("hidden", "--data", gru_store, "--samples", sample_store, "--out", out, *SMALL)
    analyze("behaviours", "--out", out, *BEHAVIOURS)
    return out


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_full_disk_leaves_the_previous_outputs_and_no_staging_folder(folder, tmp_path, capsys):
    work = shutil.copytree(folder, tmp_path / "A")
    before = snapshot(work)
    with disk_full(work, after=20_000):
        err = one_line_error(capsys, ["analyze", "hidden", "--out", str(work), *SMALL, "--seed", "1"])
    assert "No space left on device" in err and str(work / "hidden") in err and ".tmp-" not in err, err
    assert snapshot(work) == before
    assert sorted(p.name for p in work.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize(
    ("damage", "file", "argv"),
    [
        ("empty", "basis.npz", ["behaviours", *BEHAVIOURS]),
        ("flip", "basis.npz", ["behaviours", *BEHAVIOURS]),
        ("truncate", "analysis.json", ["env", "--preset", "small"]),
        ("truncate", "behaviours/transform.npz", ["behaviours", "--assign", "{samples}"]),
        ("empty", "behaviours/labels.npz", ["xcorr"]),
    ],
)
def test_a_damaged_artefact_is_one_line_naming_it(folder, sample_store, tmp_path, capsys, damage, file, argv):
    work = shutil.copytree(folder, tmp_path / "A")
    path = work / file
    data = path.read_bytes()
    if damage == "empty":
        data = b""
    elif damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data = bytearray(data)
        data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    argv = [str(sample_store) if a == "{samples}" else a for a in argv]
    err = one_line_error(capsys, ["analyze", *argv, "--out", str(work)])
    assert str(path) in err and ("corrupt" in err or "empty" in err), err


def comparable(folder: Path, outputs: str, command: str) -> dict:
    """A command's outputs, as an uninterrupted run of it must reproduce them: arrays, JSON without
    timings, the list of files, and its record in analysis.json."""
    out: dict = {}
    root = folder / outputs
    for p in sorted(root.rglob("*")) if root.is_dir() else []:
        rel = str(p.relative_to(folder))
        if not p.is_file():
            continue
        if p.suffix == ".npz":  # bit for bit (NaN included)
            with np.load(p) as f:
                out[rel] = {k: (f[k].dtype.str, f[k].shape, f[k].tobytes()) for k in f.files}
        elif p.suffix == ".json":
            out[rel] = _drop(json.loads(p.read_text().replace(str(folder), "ANALYSIS")), TIMING)
        elif "/c/" in rel:  # an episode store's chunk: the same numbers compress to the same bytes
            out[rel] = p.read_bytes()
        else:  # figures and videos: present and not empty
            out[rel] = p.stat().st_size > 0
    record = json.loads((folder / "analysis.json").read_text().replace(str(folder), "ANALYSIS"))
    out["record"] = _drop(record["commands"].get(command), TIMING)
    return out


def _drop(value, keys):
    if isinstance(value, dict):
        return {k: _drop(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_drop(v, keys) for v in value]
    return value


@pytest.fixture(scope="module")
def sim_folder(samples, wm_run, tmp_path_factory) -> Path:
    """A basis over the world model's agent states and behaviours of its samples (the inputs of the
    saliency, xcorr, consistency, intervene-sim and visualize commands)."""
    out = tmp_path_factory.mktemp("reliable-sim") / "S"
    out.mkdir()
    ws = Workspace.open(out)
    data = load_checkpoint(wm_run, kind="world_model").meta["data"]
    ws.require_inputs(activation="state_out/core.0.h", samples=samples, data=Path(data))
    x = np.random.default_rng(0).normal(size=(300, 16))
    Basis.fit(x, BasisConfig(n_ics=3), {"activation": "state_out/core.0.h"}).save(ws.basis_path)
    ws.record_command("hidden", {}, [], 0.0)
    lags = ["--pcs", "4", "--perplexity", "1", "--lags", "1", "2", "--videos", "1", "--no-stability"]
    analyze("behaviours", "--out", out, "--clusters", "2", *lags)
    return out


CPU = ["--device", "cpu", "--torch-threads", "1"]
KILLS = {  # command: (fixture, folder of its outputs, its record in analysis.json, arguments)
    "hidden": ("folder", "hidden", "hidden", ["hidden", *SMALL, "--no-plots"]),
    "behaviours": ("folder", "behaviours", "behaviours", ["behaviours", *BEHAVIOURS]),
    "env": ("folder", "env", "env", ["env", "--preset", "small", "--pcs", "8", "--clusters", "3"]),
    "bottleneck": (
        "folder",
        "bottleneck",
        "bottleneck",
        ["bottleneck", "--clusters", "2", "--permutations", "50"],
    ),
    "saliency": (
        "sim_folder",
        "saliency",
        "saliency",
        [
            "saliency",
            "--ids",
            "0:2",
            "--target",
            "value",
            "--step",
            "2",
            "--noise",
            "1",
            "--batch",
            "2",
            *CPU,
        ],
    ),
    "saliency-real": (
        "sim_folder",
        "real",
        "real",
        ["saliency", "--real", "--name", "real", "--episodes", "0:2", "--window", "4", "--step", "2", *CPU],
    ),
    "xcorr": ("sim_folder", "xcorr", "xcorr", ["xcorr", "--step", "3", "--noise", "0", "--device", "cpu"]),
    "consistency": ("sim_folder", "consistency", "consistency", ["consistency", "--permutations", "20"]),
    "intervene-sim": (
        "sim_folder",
        "intervene-sim",
        "intervene-sim",
        [
            "intervene-sim",
            "--collapse",
            "0",
            "--n",
            "4",
            "--videos",
            "1",
            "--bootstrap",
            "50",
            *CPU,
        ],
    ),
    "visualize": (
        "sim_folder",
        "visualize/min_action_right",
        "visualize-min-action_right",
        ["visualize", "--minimize", "action:right", "--step", "2", "--n", "2", "--iterations", "3", *CPU],
    ),
}


@pytest.mark.parametrize(
    "command", [*KILLS][:1] + [pytest.param(c, marks=pytest.mark.slow) for c in [*KILLS][1:]]
)
def test_kill_9_mid_command_then_rerun_gives_the_uninterrupted_outputs(request, tmp_path, command):
    """The folder holds a complete earlier run (seed 1); a run with seed 0 is killed with SIGKILL when
    it opens its second output file: the earlier run's outputs are still there, whole and recorded
    (or the command is recorded as not run), and a rerun equals an uninterrupted seed-0 run."""
    fixture, outputs, record, argv = KILLS[command]
    base = request.getfixturevalue(fixture)
    clean = shutil.copytree(base, tmp_path / "clean")
    analyze(*argv, "--out", clean, "--seed", "0")
    work = shutil.copytree(base, tmp_path / "work")
    analyze(*argv, "--out", work, "--seed", "1")
    earlier = comparable(work, outputs, record)

    killed = proclab_killed_at_write(work, 2, "analyze", *argv, "--out", str(work), "--seed", "0")
    assert killed.returncode == -9, killed.stderr[-2000:]
    after = comparable(work, outputs, record)
    assert after == earlier or (after["record"] is None and not (work / outputs).exists())

    analyze(*argv, "--out", work, "--seed", "0")
    assert comparable(work, outputs, record) == comparable(clean, outputs, record)
    assert not [p for p in work.iterdir() if ".tmp-" in p.name]  # the killed run's staging is swept
