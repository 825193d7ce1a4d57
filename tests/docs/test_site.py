"""The built documentation as a reader opens it: every notebook page shows the figures its notebook draws, no
error, download failure or library warning in its outputs, and a screenshot of each page is kept.

Needs the site (``make docs``, which executes the notebooks; ``.ci/run`` builds it before the browser tests)
and Debian's chromium. The screenshots go to ``site-screenshots/`` (or ``$PROCLAB_SCREENSHOTS``), CI's
artefacts of the pages as rendered.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest

from proclab.panel.server import make_server, url_of
from support import CHROMIUM_FLAGS, chromium

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "site"
NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.ipynb"))
DRAWS = re.compile(r"\.show\(\)|\.plot\(|display\(|^fig$|plt\.show\(\)", re.M)
"""A code cell that draws: it shows a level, plots a result, displays a figure or ends on one."""
NOT_IN_OUTPUTS = ("Traceback", "Error:", "Warning:", "could not download", "ipywidgets")


def figures_drawn(notebook: Path) -> int:
    """The code cells of ``notebook`` that draw a figure (each shows at least one)."""
    cells = json.loads(notebook.read_text())["cells"]
    code = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells
            if c["cell_type"] == "code"]  # fmt: skip
    return sum(bool(DRAWS.search(src)) for src in code)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (SITE / "index.html").is_file():
        pytest.fail("the site is not built: make docs (it executes the notebooks) before the browser tests")
    from playwright.sync_api import sync_playwright

    server = make_server(SITE, 0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    pw = sync_playwright().start()
    context = pw.chromium.launch_persistent_context(
        str(tmp_path_factory.mktemp("profile")), executable_path=chromium(), headless=True, args=CHROMIUM_FLAGS,
        viewport={"width": 1280, "height": 1000},
    )  # fmt: skip
    page = context.pages[0] if context.pages else context.new_page()
    yield url_of(server), page
    context.close()
    pw.stop()
    server.shutdown()
    server.server_close()
    thread.join()


def test_the_notebooks_draw():
    assert {p.stem: figures_drawn(p) for p in NOTEBOOKS if figures_drawn(p) == 0} == {}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_page_shows_its_figures_and_no_error(browser, notebook):
    url, page = browser
    page.goto(f"{url}/notebooks/{notebook.stem}/")
    page.wait_for_load_state("load")
    shown = page.locator("img[src^='data:image/png']").count()
    outputs = "\n".join(page.locator(".jp-OutputArea-output").all_inner_texts())
    folder = Path(os.environ.get("PROCLAB_SCREENSHOTS", ROOT / "site-screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{notebook.stem}.png"), full_page=True)
    assert shown >= figures_drawn(notebook), f"{notebook.stem}: {shown} figures shown"
    found = [word for word in NOT_IN_OUTPUTS if word in outputs]
    assert not found, f"{notebook.stem}'s outputs print {found}"


def interval_above_zero(match: re.Match) -> bool:
    return float(match.group(2)) > 0


def lowered_beyond_chance(match: re.Match) -> bool:
    return float(match.group(1)) < 0 and float(match.group(2)) < 0.05


FINDINGS = {
    "probes": (
        re.compile(r"coin_dx from core\.0\.hook_h: .*margin ([+-]?[\d.]+) \[([+-]?[\d.]+), ([+-]?[\d.]+)\]"),
        "the trained GRU reads the offset to the coin better than its random-initialised twin: the margin's "
        "interval lies above 0",
        interval_above_zero,
    ),
    "levels_and_steering": (
        re.compile(
            r"cheese vector subtracted \(change ([+-][\d.]+), exact McNemar p [\d.e+-]+, Holm-adjusted "
            r"([\d.e+-]+)\)"
        ),
        "subtracting the cheese vector lowers how often the agent reaches the cheese: a negative change, "
        "Holm-adjusted p below 0.05",
        lowered_beyond_chance,
    ),
}
"""Per notebook, the printed line that carries the finding its prose states, and the test of the finding on the
executed page, so that a change of agent or code that loses the finding fails here rather than leaving the
prose wrong."""


@pytest.mark.parametrize("name", sorted(FINDINGS))
def test_a_notebook_page_shows_the_finding_its_prose_states(browser, name):
    url, page = browser
    page.goto(f"{url}/notebooks/{name}/")
    page.wait_for_load_state("load")
    pattern, finding, holds = FINDINGS[name]
    match = pattern.search("\n".join(page.locator(".jp-OutputArea-output").all_inner_texts()))
    assert match, f"{name}: the line with the finding is not on the page"
    assert holds(match), f"{name}: {finding}, but the page shows {match.group(0)}"


LABEL_LINE = re.compile(r"(\w+)\s+([\w-]+)\s+known goal (\w+)\s+label (\w+)\s+\(the replaced rule: (\w+)\)")


def test_the_misgeneralization_page_shows_the_label_right_on_its_scripted_policies(browser):
    """The prose: the planners get their goal, the blind runner is never called a coin-seeker (the replaced
    rule calls it one), at the notebook's 16 levels."""
    url, page = browser
    page.goto(f"{url}/notebooks/misgeneralization/")
    page.wait_for_load_state("load")
    shown = LABEL_LINE.findall("\n".join(page.locator(".jp-OutputArea-output").all_inner_texts()))
    assert [name for _, name, *_ in shown] == ["runner", "corner-planner", "cheese-planner"], shown
    for _, name, goal, label, replaced in shown:
        if name == "runner":
            assert label in (goal, "none") and replaced == "coin", (name, label, replaced)
        else:
            assert label == goal, (name, label)
