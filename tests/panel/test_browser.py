"""The panel as a person uses it: exported, served, driven in headless Chromium.

Runs Debian's ``chromium`` through Playwright (``executable_path``: nothing is downloaded).
Every check reads the page's state back (plot data, canvas pixels, the shown count) and
compares it with what Python computes from the exported files.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
from PIL import Image

from proclab.cli import main
from proclab.panel.bundle import read_array
from proclab.panel.server import make_server, url_of
from support import CHROMIUM_FLAGS, chromium

pytestmark = pytest.mark.browser


class Session:
    """A served panel and a fresh headless Chromium profile, recording requests and console errors."""

    def __init__(self, panel: Path, profile: Path):
        from playwright.sync_api import sync_playwright

        self.server = make_server(panel, 0, quiet=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = url_of(self.server)
        self.pw = sync_playwright().start()
        self.context = self.pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=chromium(),
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1500, "height": 1100},
        )
        self.page = self.context.pages[0] if self.context.pages else self.context.new_page()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def open(self) -> float:
        """Load the page; seconds until it is interactive (data read, first sample drawn)."""
        start = time.perf_counter()
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready='1']", timeout=120_000)
        return time.perf_counter() - start

    def close(self) -> None:
        self.context.close()
        self.pw.stop()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def session_for(tmp_path):
    sessions = []

    def start(panel: Path) -> Session:
        sessions.append(Session(panel, tmp_path / f"profile{len(sessions)}"))
        return sessions[-1]

    yield start
    for s in sessions:
        s.close()


def js(page, expr: str):
    return page.evaluate(expr)


def count_shown(page) -> int:
    return int(page.inner_text("#match-count"))


def wait_count(page, expected: int) -> int:
    """The shown count once it reads ``expected``, or whatever it settled on (for the assert's message)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function(
            f"document.getElementById('match-count').textContent === '{expected}'", timeout=20_000
        )
    return count_shown(page)


def canvas_pixels(page, canvas: str) -> np.ndarray:
    data = js(
        page,
        f"Array.from(document.getElementById('{canvas}').getContext('2d').getImageData(0,0,256,256).data)",
    )
    return np.array(data, np.uint8).reshape(256, 256, 4)


def test_a_researcher_browses_filters_and_plays(tmp_path, analysis, session_for):
    panel = tmp_path / "panel"
    main(
        [
            "panel",
            "export",
            str(analysis),
            "--out",
            str(panel),
            "--samples",
            "40",
            "--real",
            "5",
            "--chunk",
            "8",
            "--background",
            "300",
        ]
    )
    doc = json.loads((panel / "data" / "panel.json").read_text())
    ics = read_array(panel, doc, "ics")
    grad_value = read_array(panel, doc, "grad:value")
    s = session_for(panel)
    s.open()
    page = s.page

    # pick a sample (in the second chunk, so a chunk is fetched on demand)
    page.select_option("#sample", "13")
    page.wait_for_function("document.body.dataset.sample === '13'")
    assert f"behaviour {doc['samples'][13]['behaviour']}" in page.inner_text("#sample-info")

    # axes: two ICs; the highlighted trajectory is this sample's loadings
    page.select_option("#x-axis", "ics:2")
    page.select_option("#y-axis", "ics:5")
    page.wait_for_function("document.getElementById('scatter').layout.xaxis.title.text === 'IC 2'")
    trajectory = js(
        page, "[document.getElementById('scatter').data[1].x, document.getElementById('scatter').data[1].y]"
    )
    np.testing.assert_allclose(trajectory, [ics[13, :, 2], ics[13, :, 5]], rtol=1e-6)

    # saliency: the value map blended over the frame, different from the action map
    page.select_option("#saliency", "action")
    page.wait_for_timeout(300)
    action_map = canvas_pixels(page, "saliency-canvas")
    page.select_option("#saliency", "value")
    page.wait_for_timeout(300)
    value_map = canvas_pixels(page, "saliency-canvas")
    frame = canvas_pixels(page, "frame")
    assert np.abs(value_map.astype(int) - action_map).mean() > 1
    assert np.abs(value_map.astype(int) - frame).mean() > 1

    # step: bar chart shows this step's IC loadings coloured by the value gradient loadings
    page.click("#next")
    page.wait_for_function("document.body.dataset.step === '1'")
    page.select_option("#bar-target", "value")
    page.wait_for_timeout(300)
    bars = js(
        page,
        "[document.getElementById('bars').data[0].y, document.getElementById('bars').data[0].marker.color]",
    )
    np.testing.assert_allclose(bars[0], ics[13, 1], rtol=1e-6)
    np.testing.assert_allclose(bars[1], grad_value[13, 1], rtol=1e-6)
    marker = js(page, "document.getElementById('scatter').data[2].x[0]")
    assert marker == pytest.approx(float(ics[13, 1, 2]), rel=1e-6)

    # play, then pause: the step advances while playing and stands still after
    page.click("#play")
    page.wait_for_function("document.body.dataset.step !== '1'", timeout=10_000)
    page.click("#play")
    paused_at = js(page, "document.body.dataset.step")
    page.wait_for_timeout(1200)
    assert js(page, "document.body.dataset.step") == paused_at

    # a range filter on IC 3 at steps 2-4: the count equals numpy's
    page.select_option("#filter-field", "ics")
    page.select_option("#filter-index", "3")
    x = ics[:, 2:5, 3]
    lo, hi = (float(np.float32(q)) for q in np.quantile(x, [0.1, 0.9]))
    page.fill("#filter-lo", repr(lo))
    page.fill("#filter-hi", repr(hi))
    page.fill("#filter-steps", "2-4")
    page.click("#filter-apply")
    in_range = ((x >= lo) & (x <= hi)).all(axis=1)
    assert 0 < in_range.sum() < len(in_range)
    assert wait_count(page, int(in_range.sum())) == in_range.sum()

    # ... then a behaviour on top of it
    page.select_option("#behaviour", "2")
    behaviour = np.array([m["behaviour"] == 2 for m in doc["samples"]])
    assert wait_count(page, int((in_range & behaviour).sum())) == (in_range & behaviour).sum()
    shown = js(page, "Array.from(document.getElementById('sample').options, o => +o.value)")
    assert shown == np.flatnonzero(in_range & behaviour).tolist()

    # a gradient-loading filter: NaN (samples outside the saliency run, real windows) never matches
    page.click("#filter-clear")
    grad_at4 = read_array(panel, doc, "grad:value")
    page.select_option("#filter-field", "grad:value")
    page.select_option("#filter-index", "0")
    page.fill("#filter-lo", "-100")
    page.fill("#filter-hi", "100")
    page.fill("#filter-steps", "4")
    page.click("#filter-apply")
    expected = int(((grad_at4[:, 4, 0] >= -100) & (grad_at4[:, 4, 0] <= 100)).sum())
    assert expected == 24  # the samples of the saliency run
    assert wait_count(page, expected) == expected

    # extrema lists: top 1 % of IC 1 at the saliency step
    page.click("#filter-clear")
    page.select_option("#extrema-scope", "saliency_step")
    page.select_option("#extrema-ic", "1")
    top = doc["extrema"]["saliency_step"][1]["top"]
    assert top == sorted(np.argsort(ics[:, doc["meta"]["saliency_step"], 1])[-len(top) :].tolist())
    assert wait_count(page, len(top)) == len(top)

    page.click("#filter-clear")
    page.select_option("#behaviour", "1")
    assert wait_count(page, len(doc["behaviours"][1]["members"])) == len(doc["behaviours"][1]["members"])
    page.wait_for_timeout(300)

    shot = tmp_path / "panel.png"
    page.screenshot(path=str(shot), full_page=True)
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    assert pixels.std() > 20 and len(np.unique(pixels.reshape(-1, 3), axis=0)) > 200
    assert js(page, "document.getElementById('error').hidden")
    assert s.errors == []
    hosts = {urlparse(u).hostname for u in s.requests if not u.startswith("data:")}
    assert hosts == {"127.0.0.1"}
    # large arrays are fetched on demand: not every chunk was needed for this session
    fetched = {urlparse(u).path for u in s.requests}
    assert "/data/arrays/pcs_000.f32" not in fetched
    out = os.environ.get("PROCLAB_PANEL_SCREENSHOT")
    if out:
        shutil.copyfile(shot, out)


@pytest.mark.parametrize("n_samples", [1000, 6000])
def test_time_to_interactive(tmp_path, make_synthetic_panel, session_for, n_samples):
    """Printed, not asserted (timings on a shared machine are noise); the note reports them."""
    panel = make_synthetic_panel(tmp_path / "panel", n_samples=n_samples, n_real=50)
    s = session_for(panel)
    s.open()  # a first load warms Chromium itself (its process start is not the panel's cost)
    s.page.goto("about:blank")
    seconds = s.open()
    page_seconds = int(js(s.page, "document.body.dataset.readyMs")) / 1000
    assert count_shown(s.page) == n_samples + 50
    assert s.errors == []
    size = (panel / "data" / "panel.json").stat().st_size
    print(
        json.dumps(
            {
                "bench": "panel_time_to_interactive",
                "samples": n_samples,
                "seconds": round(seconds, 3),
                "page_seconds": page_seconds,
                "panel_json_bytes": size,
            }
        )
    )
