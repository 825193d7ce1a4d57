"""`proclab quickstart --budget tiny` runs every stage, keeps a ledger, and reruns from a stage."""

import json

import pytest

from proclab.cli import main
from proclab.data import EpisodeStore
from proclab.errors import ProclabError
from proclab.io.video import read_video
from proclab.quickstart.stages import STAGES


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    main(["quickstart", "--budget", "tiny", "--out", str(out), "--precision", "fp32"])
    return out


def test_every_stage_runs_and_the_page_shows_its_outputs(demo):
    summary = json.loads((demo / "summary.json").read_text())
    assert list(summary["seconds"]) == [stage.name for stage in STAGES]
    assert all(s > 0 for s in summary["seconds"].values())
    assert summary["machine"]["precision"] == "fp32" and summary["machine"]["cores"] >= 1
    out = summary["outputs"]
    table = json.loads((demo / out["eval"]["eval"]).read_text())
    assert {r["split"] for r in table["rows"]} == {r["split"] for r in table["random"]} == {"train", "test1"}
    assert all(r["episodes"] == 2 for r in table["rows"] + table["random"])
    assert 1 <= len(read_video(demo / out["render"]["video"])) <= 40
    assert EpisodeStore(demo / out["record"]["episodes"]).num_episodes == 3
    assert EpisodeStore(demo / out["record"]["heldout"]).num_episodes == 2
    assert EpisodeStore(demo / out["wm-sample"]["samples"]).num_episodes == 12
    dream = json.loads((demo / out["wm-sample"]["dream"]).read_text())
    assert dream["steps"] == [1, 2, 3, 4, 5] and set(dream["mse"]) >= {"closed loop", "level mean frame"}
    for name in ("hidden", "env", "saliency", "behaviours"):
        assert list((demo / out[name]["folder"]).glob("*")), name
    assert (demo / out["panel"]["folder"] / "index.html").is_file()
    page = (demo / "index.html").read_text()
    for text in (
        "random agent",
        "Dream quality",
        "dream-strip.png",
        "analysis/hidden/",
        "Stage times",
        "panel serve",
    ):
        assert text in page, text


def test_from_reruns_that_stage_and_the_later_ones_only(demo, capsys):
    before = json.loads((demo / "quickstart.json").read_text())["stages"]
    main(["quickstart", "--budget", "tiny", "--out", str(demo), "--precision", "fp32", "--from", "panel"])
    after = json.loads((demo / "quickstart.json").read_text())["stages"]
    assert after["train"] == before["train"] and after["behaviours"] == before["behaviours"]
    assert after["panel"]["finished"] > before["panel"]["finished"]
    assert "finished earlier, reused" in capsys.readouterr().out


def test_from_refuses_a_stage_whose_predecessors_did_not_run(tmp_path):
    with pytest.raises(ProclabError, match="has not finished"):
        main(["quickstart", "--budget", "tiny", "--out", str(tmp_path), "--from", "record"])
    with pytest.raises(ProclabError, match="stage"):
        main(["quickstart", "--budget", "tiny", "--out", str(tmp_path), "--from", "nope"])
