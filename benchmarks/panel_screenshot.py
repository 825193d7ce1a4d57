"""Open an exported panel in headless Chromium and save screenshots of its pages.

Serves PANEL with proclab's own server (127.0.0.1, a free port), loads it in Debian's
``chromium`` through Playwright (nothing is downloaded), waits until the page says it is
interactive (the seconds it took are what the JSON line calls its time to interactive), and
writes ``OUT_atlas.png`` (the front page: the direction atlas, when the analysis
has one) and ``OUT_episode.png`` (the episode viewer). Prints one JSON line: that time, the
console errors, and the hosts the page requested (only 127.0.0.1 is expected).

    python benchmarks/panel_screenshot.py study-coinrun/panel docs/img/study_panel
"""

from __future__ import annotations

import argparse
import json
import shutil
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

from playwright.sync_api import sync_playwright

from proclab.panel.server import make_server, url_of


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("panel", type=Path, help="an exported panel (proclab panel export)")
    parser.add_argument("out", help="prefix of the PNGs written (OUT_atlas.png, OUT_episode.png)")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=1000)
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("needs Debian's chromium (apt-get install -y chromium)")
    server = make_server(args.panel, 0, quiet=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    errors, hosts = [], set()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": args.width, "height": args.height})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("request", lambda r: hosts.add(urlparse(r.url).hostname or r.url.split(":")[0]))
            page.on("pageerror", lambda e: errors.append(str(e)))
            start = time.perf_counter()
            page.goto(url_of(server))
            page.wait_for_selector("body[data-ready='1']", timeout=120_000)
            tti = round(time.perf_counter() - start, 2)
            page.wait_for_timeout(1000)  # images of the first cards and sample
            shots = {}
            if page.is_visible("#atlas-view"):
                shots["atlas"] = f"{args.out}_atlas.png"
                page.screenshot(path=shots["atlas"])
                page.click("#tab-episodes")
                page.wait_for_timeout(1500)
            shots["episode"] = f"{args.out}_episode.png"
            page.screenshot(path=shots["episode"])
            browser.close()
    finally:
        server.shutdown()
    print(
        json.dumps(
            {
                "panel": str(args.panel),
                "time_to_interactive_s": tti,
                "screenshots": shots,
                "console_errors": errors,
                "hosts": sorted(hosts),
            }
        )
    )


if __name__ == "__main__":
    main()
