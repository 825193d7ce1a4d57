"""Smoke test of ``benchmarks/panel_server_load.py`` at toy size: every request answered with the file's
bytes, every idle connection closed by the server (its JSON lines; no timings asserted)."""

import json

from support import benchmark


def test_every_request_is_answered_and_idle_connections_are_closed(capsys):
    module = benchmark("panel_server_load")
    module.main(
        ["--clients", "4", "--idle", "3", "--samples", "20", "--strips", "4", "--idle-timeout", "0.5"]
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    files = lines[0]["files"]
    load = next(line for line in lines if line.get("scenario") == "load")
    assert load["requests"] == 4 * files and load["errors"] == 0 and load["wrong_bodies"] == 0
    idle = next(line for line in lines if line.get("metric") == "idle_connections")
    assert idle["closed_by_server"] == idle["of"] == 3
    memory = next(line for line in lines if line.get("metric") == "peak_memory")
    assert memory["peak_rss_mib_after_load"] >= memory["peak_rss_mib_after_sequential"] > 0
