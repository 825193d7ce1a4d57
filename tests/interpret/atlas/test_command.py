"""`proclab analyze atlas` on a tiny recorded agent: ICA and sparse atlases with and without their sweeps,
the sparse sweep through the coordinates API, a refitted dictionary's stale sweep refused, mistakes in one
line."""

import json

import numpy as np
import pytest

from proclab.cli import main
from support import make_agent_checkpoint, record

FAST = [
    "--bootstrap",
    "60",
    "--saliency-moments",
    "2",
    "--noise",
    "1",
    "--predict-steps",
    "60",
    "--torch-threads",
    "1",
]
# 2 atoms per unit of the 16-unit state (the default is 4): 32 cards of one strip each keep it quick
SPARSE = [*FAST, "--moments", "1", "--saliency-moments", "1", "--expansion", "2"]
SWEEP = ["--levels", "2", "--rows", "8", "--split", "0:50", "--bootstrap", "50", "--permutations", "50"]


def proclab(*args) -> None:
    main(["analyze", *map(str, args)])


def strict_json(path):
    def refuse(constant):
        raise ValueError(f"{path} holds {constant}")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("atlas-command")
    checkpoint = make_agent_checkpoint(root / "agent", game="chaser")
    data = record(checkpoint, root / "DATA", episodes=4)
    out = root / "A"
    proclab("hidden", "--data", data, "--out", out, "--preset", "small", "--n-ics", "3", "--clusters", "3")
    proclab("sweep", "--out", out, "--arms", "mean,collapse", *SWEEP, "--torch-threads", "1")
    return out


def test_ica_atlas_reads_the_sweep_and_writes_every_card(folder, capsys):
    proclab("atlas", "--out", folder, *FAST)
    printed = capsys.readouterr().out
    atlas = strict_json(folder / "atlas" / "atlas.json")
    assert atlas["format"] == "proclab-atlas" and atlas["basis"] == "ica" and atlas["k"] == 3
    assert atlas["sweep"]["levels"] == 2 and atlas["sweep"]["arms"] == ["mean", "collapse"]
    assert 0 < atlas["variance_explained"] <= 1 and atlas["peak_rss_mib"] > 0
    assert {"encoding", "tracking", "saliency", "prediction"} <= set(atlas["seconds"])
    assert [c["label"] for c in atlas["cards"]] == ["IC 0", "IC 1", "IC 2"]
    for card in atlas["cards"]:
        assert card["causes"]["swept"] and {a["arm"] for a in card["causes"]["arms"]} == {"mean", "collapse"}
        strips = card["activation"]["top"] + card["activation"]["bottom"]
        assert len(strips) == 8 and all((folder / "atlas" / s["strip"]).is_file() for s in strips)
        assert (folder / "atlas" / card["saliency"]["image"]).is_file()
        assert card["summary"] in printed and set(card["keys"]) >= {"activity", "kurtosis", "effect:return"}
        assert "too few episodes (4) to test what it tracks" in card["summary"]  # 4 episodes: nothing claimed
        assert not any(t["tracked"] or t["peak"]["claimed"] for t in card["tracks"])
    assert len((folder / "atlas" / "atlas.txt").read_text().splitlines()) == 3
    assert printed.strip().splitlines()[-1] == f"outputs in {folder / 'atlas'}"
    record_ = json.loads((folder / "analysis.json").read_text())["commands"]["atlas"]
    assert "atlas/atlas.json" in record_["outputs"]


@pytest.mark.slow  # make test-all: 14 s; the ICA atlas runs in the default suite
def test_sparse_atlas_fits_its_dictionary_and_the_sweep_edits_its_atoms(folder, capsys):
    proclab("atlas", "--out", folder, "--basis", "sparse", "--dictionary-steps", "100", *SPARSE)
    first = strict_json(folder / "atlas-sparse" / "atlas.json")
    assert first["k"] == 32 and first["nonnegative"] and first["basis_fit"]["atoms"] == 32
    assert all(not c["causes"]["swept"] and c["summary"].startswith("sweep not run") for c in first["cards"])
    assert all(
        c["activation"]["bottom"] == [] for c in first["cards"]
    )  # a code's bottom is its inactive state
    proclab(
        "sweep",
        "--out",
        folder,
        "--basis",
        "sparse",
        "--directions",
        "0:2",
        "--arms",
        "mean,on",
        *SWEEP,
        "--torch-threads",
        "1",
    )
    sweep = json.loads((folder / "sweep-sparse" / "sweep.json").read_text())
    assert sweep["basis"] == "sparse" and sweep["basis_file"].endswith("dictionary.npz")
    assert "atom 0" in (folder / "sweep-sparse" / "sweep_table.txt").read_text()
    proclab("atlas", "--out", folder, "--basis", "sparse", *SPARSE)
    second = strict_json(folder / "atlas-sparse" / "atlas.json")
    assert [c["causes"]["swept"] for c in second["cards"][:3]] == [True, True, False]
    assert second["cards"][2]["causes"]["note"] == "sweep not run on this direction"
    np.testing.assert_allclose(
        second["variance_explained"], first["variance_explained"]
    )  # the same fit, reused
    proclab("atlas", "--out", folder, "--basis", "sparse", "--refit", "--dictionary-steps", "50", *SPARSE)
    third = strict_json(folder / "atlas-sparse" / "atlas.json")
    assert third["sweep"] is None and "refitted after the sweep" in third["sweep_note"]
    capsys.readouterr()


def test_units_atlas_and_sweep_and_their_comparison_with_the_ics(folder, capsys):
    """The state's units as a system: swept and described like the ICs, then compared with them."""
    sweep = ["--basis", "units", "--directions", "0:2", "--arms", "mean", *SWEEP, "--torch-threads", "1"]
    proclab("sweep", "--out", folder, *sweep)
    assert "unit 1" in (folder / "sweep-units" / "sweep_table.txt").read_text()
    proclab("atlas", "--out", folder, "--basis", "units", *SPARSE)
    units = strict_json(folder / "atlas-units" / "atlas.json")
    assert units["k"] == units["dim"] == 16 and units["cards"][3]["label"] == "unit 3"
    assert units["variance_explained"] == pytest.approx(1.0)  # nothing is left out
    assert [c["causes"]["swept"] for c in units["cards"][:3]] == [True, True, False]
    assert units["stability"]["note"].startswith("not measured")  # nothing fitted, nothing to refit
    if not (folder / "atlas" / "atlas.json").is_file():
        proclab("atlas", "--out", folder, *FAST)
    capsys.readouterr()
    proclab("compare-bases", "--out", folder, "--basis", "ica", "units", "--bootstrap", "100")
    doc = strict_json(folder / "compare-bases" / "bases.json")
    ica = strict_json(folder / "atlas" / "atlas.json")
    for name, atlas in (("ica", ica), ("units", units)):
        best = [
            max((abs(t["r0"]) for t in c["tracks"] if t["r0"] is not None), default=0.0)
            for c in atlas["cards"]
        ]
        assert doc["systems"][name]["per_direction"]["strongest_r"] == pytest.approx(best)
    assert doc["systems"]["units"]["sweep"]["of"] == 2 and doc["systems"]["ica"]["sweep"]["of"] == 3
    assert "units" in doc["against_reference"] and "outputs in" in capsys.readouterr().out


def test_nmf_atlas_says_its_sweep_was_not_run(folder):
    proclab("atlas", "--out", folder, "--basis", "nmf", *FAST)
    atlas = strict_json(folder / "atlas-nmf" / "atlas.json")
    assert atlas["k"] == 8 and atlas["prediction"] == {
        "note": "sweep not run (no sweep-nmf/sweep.json)"
    }  # small: 8


@pytest.mark.parametrize(
    "argv,message",
    [
        (["atlas", "--basis", "ica2"], "unknown --basis 'ica2'"),
        (["atlas", "--episodes", "0"], "--episodes must be >= 1"),
        (["sweep", "--basis", "sparse"], "no sparse dictionary yet"),
    ],
)
def test_mistakes_are_one_line(tmp_path, folder, capsys, argv, message):
    target = folder if argv[0] == "atlas" else tmp_path / "fresh"
    if target != folder:
        import shutil

        shutil.copytree(folder, target, ignore=shutil.ignore_patterns("dictionary.npz", "atlas*", "sweep*"))
    with pytest.raises(SystemExit) as exc:
        main(["analyze", argv[0], *argv[1:], "--out", str(target)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and message in err, err
