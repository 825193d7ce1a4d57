"""One run of each `proclab analyze` command on tiny stores, and every bad input as one line, exit 2."""

import json
import typing
from dataclasses import fields

import numpy as np
import pytest

from proclab.cli import main
from proclab.interpret.bases.pca_ica import Basis
from proclab.interpret.command import ANALYSES
from proclab.interpret.workspace.command import AGENT, DATA, SAMPLES, WM, AnalysisArgs
from proclab.run.runtime import RuntimeConfig
from proclab.store import EpisodeStore

SMALL = ["--n-ics", "4", "--clusters", "4", "--nmf", "3", "--perplexity", "10", "--fit-points", "120"]


def proclab(*args) -> None:
    main(["analyze", *map(str, args)])


@pytest.fixture(scope="module")
def analysis(gru_store, sample_store, tmp_path_factory):
    out = tmp_path_factory.mktemp("analysis") / "A"
    proclab("hidden", "--data", gru_store, "--samples", sample_store, "--out", out, *SMALL)
    return out


def test_outputs_are_named_on_the_last_line(tmp_path, gru_store, capsys):
    proclab("hidden", "--data", gru_store, "--out", tmp_path / "C", *SMALL, "--no-plots")
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"outputs in {tmp_path / 'C' / 'hidden'}"


def test_analyze_hidden(analysis, gru_store):
    summary = json.loads((analysis / "hidden" / "summary.json").read_text())
    store = EpisodeStore(gru_store)
    assert summary["points"] == store.num_steps and summary["activation"] == "state_out/core.0.h"
    assert summary["fit_points"] == 120 and 0 <= summary["outliers"] < 20
    assert sum(summary["clusters"]["sizes"]) == store.num_steps and len(summary["clusters"]["sizes"]) == 4
    assert len(summary["ica"]["kurtosis"]) == 4 and 0 < summary["variance_explained"]["1"] <= 1
    assert summary["generated"]["points"] == 400 and 0 <= summary["generated"]["inside_real_cloud"] <= 1
    a = np.load(analysis / "hidden" / "hidden.npz")
    basis = Basis.load(analysis / "basis.npz")
    x = store.read_steps("state_out/core.0")
    np.testing.assert_allclose(a["ics"], basis.to_ics(x), rtol=1e-4, atol=1e-4)
    assert a["tsne"].shape == (store.num_steps, 2) and not (a["fit"] & a["outlier"]).any()
    assert a["fit"].sum() == summary["tsne"]["fit_points"] > 100
    for png in (
        "pca_scatter",
        "tsne_scatter",
        "variance_explained",
        "trajectories_pca",
        "ic_histograms",
        "generated_over_real",
        "generated_drift",
    ):
        assert (analysis / "hidden" / f"{png}.png").stat().st_size > 10_000
    record = json.loads((analysis / "analysis.json").read_text())
    assert record["inputs"]["activation"] == "state_out/core.0.h" and "hidden" in record["commands"]


def test_drift_of_dreamed_states_against_a_brute_force_nearest_neighbour(analysis, gru_store, sample_store):
    """``nearest_real``: each dreamed state's distance to the nearest fitted real state (z-scored with the
    real states' mean and std); ``real_to_real``: the same for real states the fits did not use."""
    x = EpisodeStore(gru_store).read_steps("state_out/core.0").astype(np.float64)
    mu, sd = x.mean(0), x.std(0)
    sd[sd == 0] = 1
    z = (x - mu) / sd
    a = np.load(analysis / "hidden" / "hidden.npz")
    reference = z[a["fit"]]  # the fitted inliers
    gen = np.load(analysis / "hidden" / "generated.npz")
    y = (EpisodeStore(sample_store).read_steps("state_out/core.0").astype(np.float64) - mu) / sd

    def brute(queries):
        return np.array([np.sqrt(((reference - q) ** 2).sum(1)).min() for q in queries])

    np.testing.assert_allclose(gen["nearest_real"], brute(y), rtol=1e-4, atol=1e-4)
    candidates = brute(z[~a["fit"]])  # real states the fits did not use (the subsample is drawn from them)
    assert len(gen["real_to_real"]) > 0
    assert all(np.abs(candidates - d).min() < 1e-4 for d in gen["real_to_real"])
    drift = json.loads((analysis / "hidden" / "summary.json").read_text())["generated"]["drift"]
    assert drift["nearest_real"]["p50"] == pytest.approx(np.median(gen["nearest_real"]), rel=1e-5)
    steps = gen["step"]
    for t, median in drift["median_by_step"].items():
        assert median == pytest.approx(np.median(gen["nearest_real"][steps == int(t)]), rel=1e-5)


def test_analyze_env_and_bottleneck(analysis, sample_store):
    proclab("env", "--out", analysis, "--preset", "small", "--pcs", "8", "--clusters", "3")
    env = json.loads((analysis / "env" / "summary.json").read_text())
    assert (
        env["points"] == 400 and env["dim"] == 24 and env["pcs"] == 8 and len(env["clusters"]["sizes"]) == 3
    )
    assert env["clusters"]["silhouette"] > 0.5  # the synthetic env states form 3 well-separated groups
    proclab("bottleneck", "--out", analysis, "--clusters", "2", "--permutations", "200")
    b = json.loads((analysis / "bottleneck" / "summary.json").read_text())
    assert (b["informed"], b["random"]) == (20, 20)
    assert b["informed_vs_random"]["p_value"] < 0.05  # random vectors are shifted by 1.5 in every unit
    assert (analysis / "bottleneck" / "tsne_scatter.png").is_file()
    assert set(json.loads((analysis / "analysis.json").read_text())["commands"]) == {
        "hidden",
        "env",
        "bottleneck",
    }


def test_hook_source_on_a_feed_forward_store(ff_store, tmp_path):
    out = tmp_path / "B"
    proclab("hidden", "--data", ff_store, "--hook", "torso.hook_fc", "--out", out, *SMALL, "--no-plots")
    summary = json.loads((out / "hidden" / "summary.json").read_text())
    assert summary["activation"] == "hook:torso.hook_fc" and summary["dim"] == 32


def _snapshot(folder):
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["hidden", "--state", "core.0.c"], "unknown state 'core.0.c'"),
        (["hidden", "--hook", "torso.nope"], "unknown hook point 'torso.nope'"),
        (["hidden", "--state", "state_in/core.0.h"], "made with activation 'state_out/core.0.h'"),
        (["hidden", "--data", "{lstm}"], "made with data"),
        (["hidden", "--clusters", "100000"], "100000 clusters asked of"),
        (["hidden", "--hook", "torso.hook_fc", "--agent", "{lstm_ckpt}"], "agent states of layout"),
        (["env", "--samples", "{gru}"], "has no per-step env_h"),
        (["bottleneck", "--samples", "{gru}"], "has no per-episode bottleneck"),
        (["bottleneck", "--clusters", "41"], "41 clusters asked of 40 points"),
        (["hidden", "--preset", "huge"], "unknown preset 'huge'"),
        (["behave"], "unknown analysis 'behave'"),
    ],
)
def test_bad_input_is_one_line_and_overwrites_nothing(analysis, gru_store, lstm_store, capsys, argv, message):
    lstm_ckpt = next(iter(EpisodeStore(lstm_store).recordings().values()))["recording"]["checkpoint"]
    fill = {"{lstm}": lstm_store, "{gru}": gru_store, "{lstm_ckpt}": lstm_ckpt}
    argv = [str(fill.get(a, a)) for a in argv]
    before = _snapshot(analysis)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        proclab(*argv, "--out", analysis)
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and message in err and "\n" not in err, err
    assert _snapshot(analysis) == before


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["intervene", "--sweep", "--levels", "5"], "'analyze intervene --sweep' is now 'analyze sweep'"),
        (["intervene", "--hook", "torso.hook_fc", "--edit", "all set 0"], "'analyze intervene --hook' is now 'analyze edit'"),
        (["intervene", "--edit", "all set 0"], "'analyze intervene --edit' is now 'analyze edit'"),
        (["intervene", "--collapse", "0", "--where", "sim"], "'analyze intervene --where sim' is now 'analyze intervene-sim'"),
        (["intervene", "--where=sim", "--collapse", "0"], "'analyze intervene --where sim' is now 'analyze intervene-sim'"),
        (["intervene", "--where", "real"], "'analyze intervene --where real' is now 'analyze intervene'"),
        (["intervene", "--where", "both"], "'analyze intervene --where both' is now 'analyze intervene, then analyze intervene-sim'"),
        (["intervene", "--collapse", "0", "--n", "4"], "'analyze intervene --n' is now 'analyze intervene-sim --n'"),
        (["probe", "--checkpoint", "run"], "'--checkpoint' is now '--agent'"),
        (["atlas", "--checkpoint=run", "--help"], "'--checkpoint' is now '--agent'"),
    ],
)  # fmt: skip
def test_a_renamed_spelling_answers_in_one_line(tmp_path, capsys, argv, line):
    with pytest.raises(SystemExit) as exit_:
        proclab(*argv, "--out", tmp_path / "A")
    assert exit_.value.code == 2 and capsys.readouterr().err == f"proclab: error: {line}\n"
    assert not (tmp_path / "A").exists()


TAKES_AGENT = {
    "hidden",
    "saliency",
    "edit",
    "intervene",
    "sweep",
    "atlas",
    "probe",
    "steer",
    "decision-square",
}
"""Analyses that replay or play an agent given by --agent (the others' agent is the world model's own, or none)."""
READS_STORE = {"hidden", "saliency", "edit", "atlas", "probe"}
"""Analyses that read an episode store given by --data."""


@pytest.mark.parametrize("name", sorted(ANALYSES))
def test_every_analysis_spells_its_inputs_and_runtime_alike(name):
    cls = ANALYSES[name][0]
    hints = typing.get_type_hints(cls, include_extras=True)
    found = {f.name: f for f in fields(cls)}
    assert "checkpoint" not in found and "device" in found
    for f in fields(RuntimeConfig):
        assert found[f.name].default == f.default, f.name
    assert ("agent" in found) == (name in TAKES_AGENT) and ("data" in found) == (name in READS_STORE)
    for flag, spelled in (("agent", AGENT), ("data", DATA), ("wm", WM), ("samples", SAMPLES)):
        assert flag not in found or hints[flag] == spelled, flag
    # each analysis says what its seed drives (a redeclared seed), not AnalysisArgs' generic line
    assert any(
        "seed" in vars(c).get("__annotations__", {}) for c in cls.__mro__[: cls.__mro__.index(AnalysisArgs)]
    )
