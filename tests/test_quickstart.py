"""`proclab quickstart --budget tiny` runs every stage, keeps a ledger, and reruns from a stage."""

import json

import pytest

from proclab.cli import main
from proclab.errors import ProclabError
from proclab.io.files import DiskFullError
from proclab.io.video import read_video
from proclab.quickstart.ledger import LEDGER, Ledger
from proclab.quickstart.stages import STAGES
from proclab.store import EpisodeStore
from support import disk_full

# Bigfish rather than the default CoinRun: an untrained agent's episodes end after about 80 steps there
# against about 700 in CoinRun, which made this fixture the suite's longest; no stage depends on the game.
TINY = ["quickstart", "--budget", "tiny", "--precision", "fp32", "--game", "bigfish"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    main([*TINY, "--out", str(out)])
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
    atlas = json.loads((demo / out["atlas"]["folder"] / "atlas.json").read_text())
    assert (
        atlas["k"] == 2
        and atlas["sweep"]["levels"] == 2
        and all(c["causes"]["swept"] for c in atlas["cards"])
    )
    panel = json.loads((demo / out["panel"]["folder"] / "data" / "panel.json").read_text())
    assert [c["summary"] for c in panel["atlases"][0]["cards"]] == [c["summary"] for c in atlas["cards"]]
    page = (demo / "index.html").read_text()
    for text in (
        "Direction atlas",
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
    main([*TINY, "--out", str(demo), "--from", "panel"])
    after = json.loads((demo / "quickstart.json").read_text())["stages"]
    assert after["train"] == before["train"] and after["behaviours"] == before["behaviours"]
    assert after["panel"]["finished"] > before["panel"]["finished"]
    assert "finished earlier, reused" in capsys.readouterr().out


def test_from_refuses_a_stage_whose_predecessors_did_not_run(tmp_path, capsys):
    for stage, message in (("record", "stage 'train' has not finished"), ("nope", "unknown stage 'nope'")):
        with pytest.raises(SystemExit) as exit_:
            main(["quickstart", "--budget", "tiny", "--out", str(tmp_path), "--from", stage])
        assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_the_ledger_survives_a_full_disk_and_a_damaged_ledger_is_one_line(tmp_path):
    """A full disk while the ledger records a stage: one line naming it, the ledger as it was before,
    no temporary; a damaged ledger is one line naming it."""
    ledger = Ledger(tmp_path, {"budget": "tiny"})
    ledger.finish("train", 1.0, {"run": "runs/x"})
    before = (tmp_path / LEDGER).read_bytes()
    with disk_full(tmp_path), pytest.raises(DiskFullError, match=r"quickstart\.json"):
        ledger.finish("record", 2.0, {"data": "data/x"})
    assert (tmp_path / LEDGER).read_bytes() == before and [p.name for p in tmp_path.iterdir()] == [LEDGER]
    assert Ledger(tmp_path, {"budget": "tiny"}).stages.keys() == {"train"}
    (tmp_path / LEDGER).write_bytes(before[: len(before) // 2])
    with pytest.raises(ProclabError, match=r"quickstart ledger .*quickstart\.json. is corrupt or truncated"):
        Ledger(tmp_path, {"budget": "tiny"})


@pytest.mark.browser
def test_the_page_loads_in_chromium_with_every_image_and_video(demo):
    from playwright.sync_api import sync_playwright

    from support import CHROMIUM_FLAGS, chromium

    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((demo / "index.html").as_uri())
        page.wait_for_load_state("load")
        broken = page.evaluate(
            "[...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"
        )
        page.wait_for_function(
            "[...document.querySelectorAll('video')].every(v => v.readyState >= 1 || v.error)", timeout=30_000
        )
        bad_videos = page.evaluate(
            "[...document.querySelectorAll('video')].filter(v => v.error).map(v => v.src)"
        )
        counts = page.evaluate("[document.images.length, document.querySelectorAll('video').length]")
        page.screenshot(path=str(demo / "index.png"), full_page=True)
        browser.close()
    assert counts[0] >= 5 and counts[1] >= 3, counts
    assert not broken and not bad_videos and not errors, (broken, bad_videos, errors)
    assert (demo / "index.png").stat().st_size > 20_000


@pytest.mark.browser
def test_the_quickstart_panel_opens_on_the_atlas(demo, tmp_path):
    from playwright.sync_api import sync_playwright

    from proclab.panel.server import make_server, url_of
    from proclab.quickstart.stages import ON_DATA_ARMS
    from support import CHROMIUM_FLAGS, chromium

    summary = json.loads((demo / "summary.json").read_text())
    server = make_server(demo / summary["outputs"]["panel"]["folder"], 0, quiet=True)
    import threading

    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    errors: list[str] = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium(), headless=True, args=CHROMIUM_FLAGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url_of(server))
            page.wait_for_selector("body[data-ready='1']", timeout=60_000)
            view = page.evaluate("document.body.dataset.view")
            cards = page.evaluate("document.querySelectorAll('#cards .card').length")
            rows = page.evaluate("document.querySelectorAll('#sweep-table tr[id]').length")
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    arms = len(ON_DATA_ARMS.split(","))  # one sweep row per (IC, arm)
    assert view == "atlas" and cards == 2 and rows == 2 * arms and not errors, (view, cards, rows, errors)


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(
            "train-procgen-gru", marks=pytest.mark.slow
        ),  # 20 s: every stage runs in the default suite
        pytest.param("cleanrl", marks=pytest.mark.slow),
        pytest.param("torchbeast-srwm", marks=pytest.mark.slow),
        pytest.param("cleanba", marks=pytest.mark.slow),
    ],
)
def test_quickstart_studies_an_imported_agent(tmp_path, variant):
    """--agent replaces training by the import of another code base's checkpoint; every later stage runs
    on it, eval and record use its own training levels and the levels after them."""
    from foreign_agents import VARIANTS

    factory, filename, fmt = VARIANTS[variant]
    source = factory().save(tmp_path / filename)
    game = "starpilot" if fmt == "cleanba" else "bigfish"
    out = tmp_path / "demo"
    main(
        [
            "quickstart",
            "--budget",
            "tiny",
            "--out",
            str(out),
            "--precision",
            "fp32",
            "--agent",
            str(source),
            "--game",
            game,
        ]
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["game"] == game and summary["agent"]["imported"] is True
    assert summary["outputs"]["plot"]["curves"] is None  # no training curves for an agent trained elsewhere
    config = json.loads((out / summary["agent"]["run"] / "config.json").read_text())
    assert config["import"]["format"] == fmt
    table = json.loads((out / summary["outputs"]["eval"]["eval"]).read_text())
    assert set(table["roles"]) == {r["split"] for r in table["rows"]}
    assert (out / summary["outputs"]["panel"]["folder"] / "index.html").is_file()


def test_quickstart_refuses_an_agent_of_another_game_or_mode(tmp_path, capsys):
    from foreign_agents import TorchbeastRef

    source = TorchbeastRef().save(tmp_path / "model.tar")  # its flags say bigfish, easy
    for flags, message in (
        (["--game", "coinrun"], "trained in game bigfish"),
        (["--mode", "hard"], "trained in mode easy"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(
                [
                    "quickstart",
                    "--budget",
                    "tiny",
                    "--out",
                    str(tmp_path / "q"),
                    "--agent",
                    str(source),
                    *flags,
                ]
            )
        assert exit_.value.code == 2 and message in capsys.readouterr().err
