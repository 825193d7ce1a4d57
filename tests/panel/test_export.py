"""proclab panel export on a small analysis folder: the schema, and each value against its source."""

import json

import jsonschema
import numpy as np
import pytest

from proclab.cli import main
from proclab.errors import ProclabError
from proclab.interpret.bases.activations import read_activation
from proclab.interpret.workspace.folder import Workspace
from proclab.panel.bundle import load_schema, read_array
from proclab.panel.export import PanelSettings, export
from proclab.store import EpisodeStore


@pytest.fixture(scope="module")
def panel(analysis, tmp_path_factory):
    out = tmp_path_factory.mktemp("panel") / "P"
    main(
        [
            "panel",
            "export",
            str(analysis),
            "--out",
            str(out),
            "--samples",
            "30",
            "--real",
            "4",
            "--chunk",
            "8",
            "--background",
            "200",
        ]
    )
    return out, json.loads((out / "data" / "panel.json").read_text())


def test_export_follows_schema(panel):
    out, doc = panel
    jsonschema.Draft202012Validator(load_schema()).validate(doc)
    assert [s["kind"] for s in doc["samples"]] == ["sample"] * 30 + ["real"] * 4
    assert doc["meta"]["steps"] == 10 and doc["meta"]["saliency_step"] == 4
    assert doc["meta"]["targets"] == ["action", "ic_0", "value"]
    assert len(doc["arrays"]["ics"]["files"]) == 5  # 34 rows in chunks of 8
    assert len(doc["background"]["ics"]) == 200
    for s in doc["samples"]:
        for rel in s["strips"].values():
            assert (out / "data" / rel).is_file()


def test_loadings_are_the_folder_basis_applied_to_the_stores(panel, analysis):
    out, doc = panel
    ws = Workspace.open(analysis, create=False)
    basis = ws.basis()
    samples = EpisodeStore(ws.inputs["samples"])
    x = read_activation(samples, ws.inputs["activation"], np.arange(30)).x.reshape(30, 10, -1)
    ics = read_array(out, doc, "ics")
    np.testing.assert_allclose(
        ics[:30], basis.to_ics(x.reshape(300, -1)).reshape(30, 10, -1), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        read_array(out, doc, "pcs")[:30],
        basis.to_pcs(x.reshape(300, -1))[:, :16].reshape(30, 10, -1),
        rtol=1e-5,
        atol=1e-5,
    )
    real = EpisodeStore(ws.inputs["data"])
    xr = read_activation(real, ws.inputs["activation"], [2]).x[3:13]
    np.testing.assert_allclose(ics[32], basis.to_ics(xr), rtol=1e-5, atol=1e-5)
    assert doc["samples"][32]["name"] == "episode 2 steps 3-12"
    assert doc["samples"][5]["actions"] == samples.read(5, ["action"])["action"].tolist()


def test_gradient_loadings_come_from_the_env_grads_run_and_are_nan_elsewhere(panel, analysis):
    out, doc = panel
    sal = EpisodeStore(analysis / "saliency" / "store.zarr")
    g = read_array(out, doc, "grad:value")
    rows = {
        (int(s), bool(e)): r
        for r, (s, e) in enumerate(
            zip(sal.read_episode_field("sample"), sal.read_episode_field("env_grads"), strict=True)
        )
    }
    for i in (0, 7, 23):
        np.testing.assert_array_equal(g[i], sal.read(rows[i, True], ["grad/value/ic"])["grad/value/ic"])
    assert np.isnan(g[24:]).all()  # samples 24.. had no saliency run; real windows have no IC gradients
    ic0 = read_array(out, doc, "grad:ic_0")
    second = EpisodeStore(analysis / "saliency-ic" / "store.zarr")
    np.testing.assert_array_equal(
        ic0[:10], np.stack([second.read(i, ["grad/ic_0/ic"])["grad/ic_0/ic"] for i in range(10)])
    )
    assert np.isnan(ic0[10:]).all()
    assert set(doc["samples"][0]["strips"]) == {"obs", "value", "action", "ic_0"}
    assert set(doc["samples"][12]["strips"]) == {"obs", "value", "action"}
    assert set(doc["samples"][24]["strips"]) == {"obs"}
    assert set(doc["samples"][30]["strips"]) == {"obs", "value"}  # agent-alone map of a real window


def test_behaviours_extrema_and_agent_context(panel):
    out, doc = panel
    assert [b["members"] for b in doc["behaviours"]] == [list(range(b, 30, 3)) for b in range(3)]
    assert all(doc["samples"][i]["behaviour"] == i % 3 for i in range(30))
    ics = read_array(out, doc, "ics")
    top = doc["extrema"]["saliency_step"][2]["top"]
    assert top == [int(np.argmax(ics[:, 4, 2]))]  # 1 % of 34 rounds to one sample
    assert doc["training"] == {
        "metric": "charts/episodic_return",
        "steps": [2048.0, 4096.0],
        "values": [3.5, 6.25],
    }
    assert [(r["split"], r["return_mean"]) for r in doc["eval"]] == [("train", 5.0), ("test1", 4.0)]
    assert doc["interventions"] == []


def test_intervention_summaries_and_videos_are_carried(analysis, tmp_path):
    iv = analysis / "intervene-collapse"
    iv.mkdir()
    try:
        (iv / "summary.json").write_text('{"return_change": -1.5}')
        (iv / "videos").mkdir()
        (iv / "videos" / "a.mp4").write_bytes(b"not really a video")
        out = export(
            analysis, tmp_path / "P", PanelSettings(samples=3, real=0, background=50), progress=False
        )
        doc = json.loads((out / "data" / "panel.json").read_text())
        assert doc["interventions"] == [
            {
                "name": "intervene-collapse",
                "summary": {"return_change": -1.5},
                "video": "videos/intervene-collapse.mp4",
            }
        ]
        assert (out / "data" / "videos" / "intervene-collapse.mp4").read_bytes() == b"not really a video"
    finally:
        import shutil

        shutil.rmtree(iv)


def test_errors_are_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["panel", "export", str(tmp_path), "--out", str(tmp_path / "P")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "not an analysis folder" in err and len(err.splitlines()) == 1


def test_a_sample_store_with_predicted_rewards_shows_them(tmp_path):
    """wm sample stores hold the world model's reward_norm, not reward."""
    from proclab.panel.export import _read_steps
    from proclab.store import ShardWriter

    with ShardWriter(tmp_path / "S", commit_seconds=0) as w:
        w.append(
            {
                "obs": np.zeros((4, 3, 64, 64), np.uint8),
                "action": np.arange(4),
                "value": np.ones(4, np.float32),
                "reward_norm": np.array([0, 0, 0.5, 1], np.float32),
            },
            {},
        )
    got = _read_steps(EpisodeStore(tmp_path / "S"), 0, 1, 4)
    assert got["reward"].tolist() == [0, 0.5, 1] and got["action"].tolist() == [1, 2, 3]


def test_refuses_to_write_over_a_folder_that_is_not_a_panel(analysis, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    for out in (analysis, tmp_path, tmp_path / "notes.txt"):
        with pytest.raises(ProclabError, match="not a panel folder"):
            export(analysis, out, PanelSettings(samples=2, real=0, background=10), progress=False)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_atlas_cards_link_to_windows_that_hold_their_moments(atlas_analysis, tmp_path):
    out = export(atlas_analysis, tmp_path / "P", PanelSettings(samples=5, real=2, chunk=8), progress=False)
    doc = json.loads((out / "data" / "panel.json").read_text())
    jsonschema.Draft202012Validator(load_schema()).validate(doc)
    (atlas,) = doc["atlases"]
    source = json.loads((atlas_analysis / "atlas" / "atlas.json").read_text())
    assert atlas["basis"] == "ica" and [c["summary"] for c in atlas["cards"]] == [
        c["summary"] for c in source["cards"]
    ]
    ws = Workspace.open(atlas_analysis, create=False)
    store, basis = EpisodeStore(ws.inputs["data"]), ws.basis()
    ics = read_array(out, doc, "ics")
    linked = 0
    for card in atlas["cards"]:
        assert (out / "data" / card["saliency"]).is_file()
        for m in card["moments"]:
            assert (out / "data" / m["strip"]).is_file()
            if m["sample"] is None:
                continue
            linked += 1
            x = read_activation(store, ws.inputs["activation"], [m["episode"]]).x[m["step"]]
            np.testing.assert_allclose(
                ics[m["sample"], m["sample_step"]], basis.to_ics(x[None])[0], rtol=1e-5, atol=1e-5
            )
            name = doc["samples"][m["sample"]]["name"]  # a window is shared by the moments it holds
            assert name.startswith(f"episode {m['episode']} steps ") and "moment" in name
    assert linked == 2 * len(
        atlas["cards"]
    )  # --atlas-moments 1: the first top and bottom moment of each card
    assert atlas["sweep_rows"] == [] and all(not c["causes"]["swept"] for c in atlas["cards"])


def _with_ground_truth(analysis, tmp_path):
    """A copy of the analysis folder (and of its inputs) whose real store carries ground truth: features
    of a BigFish-like agent wandering over a real level's first state, stored as ``proclab record`` does."""
    import shutil

    from proclab.levels.level import generate_level
    from proclab.record.ground_truth import ground_truth_names
    from proclab.store import ShardWriter
    from proclab.store.schema import GROUND_TRUTH_ATTR, STATE_LAYOUT_ATTR

    root = tmp_path / "copy"
    shutil.copytree(analysis.parent, root)
    for f in root.rglob("*.json"):  # every recorded path now points into the copy
        f.write_text(f.read_text().replace(str(analysis.parent), str(root)))
    old = EpisodeStore(root / "DATA")
    names = ground_truth_names(["bigfish"])
    first = generate_level("bigfish", "easy", 4).data
    rng = np.random.default_rng(0)
    with ShardWriter(root / "DATA2", attrs={STATE_LAYOUT_ATTR: old.shards[0].attrs[STATE_LAYOUT_ATTR],
                                           GROUND_TRUTH_ATTR: names}, commit_seconds=0) as w:  # fmt: skip
        for ep in old:
            T = ep.length
            features = np.full((T, len(names["features"])), np.nan, np.float32)
            features[:, :2] = rng.uniform(2, 18, (T, 2))  # agent_x, agent_y
            features[:, names["features"].index("fish_dx")] = rng.uniform(-3, 3, T)
            features[:, names["features"].index("fish_dy")] = rng.uniform(-3, 3, T)
            info = {k: v for k, v in ep.info.items() if k not in ("start", "length")}
            steps = {k: v for k, v in ep.steps.items() if not k.startswith("state_in/")}  # derived on reading
            w.append({**steps, "features": features}, {**info, "initial_state": first})
    shutil.rmtree(root / "DATA")
    (root / "DATA2").rename(root / "DATA")
    return root / "A"


def test_real_episodes_recorded_with_ground_truth_carry_its_markers(analysis, tmp_path):
    """Each real window carries its steps' markers (agent, goal: none in BigFish, nearest fish), those of
    :func:`truth_markers` on its rows; the agent's marker sits where the camera of the stored first state
    puts the recorded position; simulated samples carry none."""
    from proclab.envs.state import parse_state, to_pixels
    from proclab.panel.truth import truth_markers

    copy = _with_ground_truth(analysis, tmp_path)
    out = export(copy, tmp_path / "P", PanelSettings(samples=4, real=3, background=50), progress=False)
    doc = json.loads((out / "data" / "panel.json").read_text())
    jsonschema.Draft202012Validator(load_schema()).validate(doc)
    real = [s for s in doc["samples"] if s["kind"] == "real"]
    assert len(real) == 3 and all("truth" not in s for s in doc["samples"] if s["kind"] == "sample")
    data = EpisodeStore(copy.parent / "DATA")
    first = parse_state(data.read_blob("initial_state", 0))
    for s in real:
        words = s["name"].split()  # "episode E steps A-B"
        e, offset = int(words[1]), int(words[3].split("-")[0])
        assert s["truth"] == truth_markers(data, e, offset, offset + len(s["actions"]))
        assert s["truth"]["names"] == ["agent", "goal", "fish"]
        assert all(row[1] is None for row in s["truth"]["x"])  # BigFish has no goal
        ax, ay = data.read(e, ["features"], offset, offset + 1)["features"][0, :2].astype(float)
        px, py = (
            (32.0, 32.0) if first.header.center_agent else to_pixels(first, ax, ay)
        )  # camera on the agent
        assert s["truth"]["x"][0][0] == pytest.approx(px, abs=0.01)
        assert s["truth"]["y"][0][0] == pytest.approx(py, abs=0.01)
