"""Coordinate systems compared: each number against a loop over hand-made cards, the intervals against the
resamples redrawn and recomputed one by one, and the command's mistakes in one line."""

import json

import numpy as np
import pytest

from proclab.cli import main
from proclab.interpret.atlas.comparison import against, difference, measure, summary_interval
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.workspace.folder import Workspace
from proclab.interpret.workspace.systems import file_digest
from proclab.stats.proportions import wilson


def cards(rng, k: int, strength: float) -> list[dict]:
    """``k`` cards, each tracking value, an action and two ground-truth quantities at random strengths."""
    out = []
    for m in range(k):
        rows = []
        for q in ("value", "action right", "gt agent_x", "gt saw proximity"):
            r = float(np.clip(rng.normal(0, strength), -0.99, 0.99))
            rows.append({"quantity": q, "r0": r, "tracked": bool(abs(r) > 0.1)})
        rows.append({"quantity": "progress", "r0": None, "tracked": False})  # constant: not measured
        out.append({"direction": m, "tracks": rows})
    return out


def sweep_doc(flags: list[tuple[bool, bool]], returns: dict | None = None) -> dict:
    """A written sweep's claims (significant alone, across) per direction, and its results: per direction
    the return p-value and off-data flag of each arm (``returns``; p = 0.5 on the data by default)."""
    basis = [{"direction": m, "significant_alone": a, "significant": b} for m, (a, b) in enumerate(flags)]
    returns = returns or {}
    results = [
        {"direction": m, "arm": arm, "random": False, "return": {"p": p}, "length": {"p": 0.001},
         "edit": {"off_data": off}}
        for m in range(len(flags)) for arm, (p, off) in returns.get(m, {"mean": (0.5, False)}).items()
    ]  # fmt: skip
    results.append(  # a random direction's row: not the basis's, whatever its p
        {"direction": 0, "arm": "mean", "random": True, "return": {"p": 1e-6}, "length": {"p": 1e-6},
         "edit": {"off_data": False}}
    )  # fmt: skip
    return {"levels": list(range(30)), "arms": {"mean": "", "p95": ""}, "correction": {"alpha": 0.05},
            "results": results, "claims": {"basis": basis, "metrics": ["return", "length"],
                                           "matter": {"rule": "claim significant at alpha within its direction"}}}  # fmt: skip


def test_each_systems_numbers_against_loops_over_its_cards():
    rng = np.random.default_rng(0)
    made = cards(rng, 12, 0.4)
    returns = {
        0: {"mean": (0.01, False), "p95": (0.04, False)},  # 2 x 0.01 <= 0.05: changes return
        1: {"mean": (0.03, False), "p95": (0.03, False)},  # 2 x 0.03 > 0.05: not shown
        2: {"mean": (0.001, True), "p95": (0.2, False)},  # its small p is off the data: left out
    }
    sweep = sweep_doc([(True, True), (True, False), (False, False)], returns)
    got = measure({"label": "IC", "cards": made}, sweep, 0.3, 300, 5)
    for m, card in enumerate(made):
        best = best_gt = 0.0
        for t in card["tracks"]:
            if t["r0"] is not None:
                best = max(best, abs(t["r0"]))
                if t["quantity"].startswith("gt "):
                    best_gt = max(best_gt, abs(t["r0"]))
        assert got["per_direction"]["strongest_r"][m] == best
        assert got["per_direction"]["strongest_gt_r"][m] == best_gt
    count = 0
    for card in made:
        count += any(
            t["tracked"] and t["quantity"].startswith("gt ") and abs(t["r0"]) >= 0.3 for t in card["tracks"]
        )
    assert got["ground_truth"]["count"] == count and got["ground_truth"]["of"] == 12
    assert got["ground_truth"]["ci95"] == pytest.approx(list(wilson(count, 12)))
    assert got["sweep"]["count"] == 2 and got["sweep"]["of"] == 3 and got["sweep"]["significant_across"] == 1
    changed = 0
    for m in range(3):  # Bonferroni over the direction's on-data arms' return tests, as a loop
        p = [p for p, off in returns[m].values() if not off]
        changed += min(p) * len(p) <= 0.05
    assert got["sweep"]["changes_return"]["count"] == changed == 1
    assert measure({"label": "IC", "cards": made}, None, 0.3, 50, 5)["sweep"] is None
    assert measure({"label": "IC", "cards": made}, sweep_doc([]), 0.3, 50, 5)["sweep"] is None  # none held


@pytest.mark.parametrize("statistic", ["mean", "median"])
def test_intervals_over_directions_against_the_resamples_one_by_one(statistic):
    rng = np.random.default_rng(1)
    a, b = rng.random(16), rng.random(40) * 0.8
    fn = {"mean": np.mean, "median": np.median}[statistic]
    reps = 400
    draws_a = np.random.default_rng(7).integers(0, 16, (reps, 16))  # the resamples, redrawn
    draws_b = np.random.default_rng(8).integers(0, 40, (reps, 40))
    boot_a = [fn(a[d]) for d in draws_a]
    boot_b = [fn(b[d]) for d in draws_b]
    one = summary_interval(a, statistic, reps, 7)
    assert one["value"] == fn(a)
    np.testing.assert_allclose(one["ci95"], np.percentile(boot_a, [2.5, 97.5]))
    two = difference(a, b, statistic, reps, 7)
    assert two["difference"] == pytest.approx(fn(a) - fn(b))
    np.testing.assert_allclose(two["ci95"], np.percentile(np.subtract(boot_a, boot_b), [2.5, 97.5]))


def test_a_system_with_stronger_correlates_is_told_apart_from_a_weaker_one():
    rng = np.random.default_rng(2)
    strong = measure(
        {"label": "IC", "cards": cards(rng, 30, 0.6)},
        sweep_doc([(True, True)] * 12 + [(False, False)] * 4),
        0.3,
        500,
        0,
    )
    weak = measure(
        {"label": "unit", "cards": cards(rng, 60, 0.1)}, sweep_doc([(False, False)] * 16), 0.3, 500, 0
    )
    d = against(weak, strong, 500, 0)
    assert d["strongest_r"]["mean"]["ci95"][1] < 0 and d["strongest_gt_r"]["median"]["ci95"][1] < 0
    assert d["ground_truth"]["difference"] < 0 and d["ground_truth"]["ci95"][1] < 0
    assert d["sweep"]["difference"] == -0.75 and d["sweep"]["p_fisher"] < 0.01


def folder(tmp_path, episodes=(50, 50)):
    """A folder with a basis, hand-made atlases of ica and units on the current fit, a sweep of ica."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 6))
    ws = Workspace.open(tmp_path / "A")
    ws.require_inputs(activation="state_out/core.0.h")
    Basis.fit(x, BasisConfig(n_ics=3), {}).save(ws.basis_path)
    digest = file_digest(ws.basis_path)
    for (name, k, strength), n in zip((("ica", 3, 0.5), ("units", 6, 0.2)), episodes, strict=True):
        atlas = {"basis": name, "label": name, "basis_digest": digest, "data": "DATA", "episodes": n,
                 "variance_explained": 0.5, "cards": cards(rng, k, strength)}  # fmt: skip
        folder = ws.path / ("atlas" if name == "ica" else "atlas-units")
        folder.mkdir()
        (folder / "atlas.json").write_text(json.dumps(atlas))
    (ws.path / "sweep").mkdir()
    sweep = {**sweep_doc([(True, True), (False, False), (True, False)]), "basis_digest": digest}
    (ws.path / "sweep" / "sweep.json").write_text(json.dumps(sweep))
    ws.record_command("hidden", {}, [], 0.0)
    return ws.path


def test_the_command_writes_json_table_and_figure(tmp_path, capsys):
    out = folder(tmp_path)
    main(["analyze", "compare-bases", "--out", str(out), "--basis", "ica", "units", "--bootstrap", "200"])
    printed = capsys.readouterr().out
    doc = json.loads((out / "compare-bases" / "bases.json").read_text())
    assert doc["format"] == "proclab-compare-bases" and list(doc["systems"]) == ["ica", "units"]
    assert doc["systems"]["ica"]["sweep"]["count"] == 2 and doc["systems"]["units"]["sweep"] is None
    assert (
        "sweep not run" in doc["sweep_notes"]["units"] and doc["against_reference"]["units"]["sweep"] is None
    )
    assert (out / "compare-bases" / "bases.txt").read_text() in printed
    assert (out / "compare-bases" / "bases.png").is_file() and "not swept" in printed
    assert (
        "compare-bases/bases.json"
        in json.loads((out / "analysis.json").read_text())["commands"]["compare-bases"]["outputs"]
    )


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--basis", "ica"], "compare two or more"),
        (["--basis", "ica", "units", "--reference", "pca"], "unknown --reference 'pca'"),
        (["--basis", "ica", "sparse"], "no atlas of sparse"),
        (["--basis", "ica", "units", "--threshold", "2"], "--threshold must be in [0, 1]"),
    ],
)
def test_mistakes_are_one_line(tmp_path, capsys, argv, message):
    out = folder(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["analyze", "compare-bases", "--out", str(out), *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and message in err, err


def test_atlases_of_different_episodes_or_an_earlier_fit_are_refused(tmp_path, capsys):
    out = folder(tmp_path, episodes=(50, 40))
    with pytest.raises(SystemExit):
        main(["analyze", "compare-bases", "--out", str(out)])
    assert "describe different episodes" in capsys.readouterr().err
    Basis.fit(np.random.default_rng(9).normal(size=(100, 6)), BasisConfig(n_ics=3), {}).save(
        out / "basis.npz"
    )
    with pytest.raises(SystemExit):
        main(["analyze", "compare-bases", "--out", str(out)])
    assert "an earlier fit of ica" in capsys.readouterr().err
