"""The panel server under load: many clients fetching every file of a panel beside idle connections.

One server process (``proclab panel serve``, on 127.0.0.1 and a free port) serves a synthetic
exported panel written by the exporter's own writer (``write_panel``: the static app,
plotly.js, ``panel.json``, the array chunks and the strip images). Two scenarios, every
request timed from connect to its last byte:

* ``sequential``: one client fetches every file of the panel once (the baseline);
* ``load``: ``--idle`` connections that send nothing are opened first and held open, then
  ``--clients`` threads each fetch every file (each in its own shuffled order, ``--rounds``
  times). Every body is compared with the file on disk.

The idle connections are then watched until the server closes them (``--idle-timeout``).
Peak memory is the server process's peak resident set (``VmHWM`` in /proc), read after the
start-up and the sequential pass, and again after the load; ``threads_max`` is the most
threads the server ran at once. Traffic stays on 127.0.0.1. One JSON line per measurement:

    python benchmarks/panel_server_load.py --clients 50 --idle 20 --samples 1000
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from proclab.panel.bundle import PanelData, write_panel

HOST = "127.0.0.1"


def make_panel(out: Path, samples: int, strips: int, steps: int = 10, ics: int = 16) -> Path:
    """A panel of ``samples`` samples: IC, PC and two gradient arrays in chunks of 500, ``strips``
    strip images of ``steps`` 64x64 frames."""
    rng = np.random.default_rng(0)
    arrays = {name: rng.standard_normal((samples, steps, ics)).astype(np.float32) for name in ("ics", "pcs")}
    arrays |= {
        f"grad:{t}": rng.standard_normal((samples, steps, ics)).astype(np.float32)
        for t in ("value", "action")
    }
    images = {
        f"strip_{i:04d}.png": rng.integers(0, 255, (64, 64 * steps, 3), dtype=np.uint8) for i in range(strips)
    }
    doc = {"meta": {"title": "load benchmark", "created": time.strftime("%Y-%m-%dT%H:%M:%S")}, "samples": []}
    return write_panel(out, PanelData(doc, arrays, images))


def start_server(panel: Path, idle_timeout: float) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "proclab",
            "panel",
            "serve",
            str(panel),
            "--port",
            "0",
            "--idle-timeout",
            str(idle_timeout),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = proc.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    if found is None:
        proc.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    return proc, int(found.group(1))


def status_of(pid: int) -> dict[str, int]:
    """VmHWM / VmRSS (kB) and Threads of a process, from /proc."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS", "Threads"):
            out[key] = int(value.split()[0])
    return out


def fetch(port: int, path: str) -> tuple[float, bytes | None]:
    """Seconds from connect to the last byte, and the body (None on an error)."""
    start = time.perf_counter()
    try:
        conn = http.client.HTTPConnection(HOST, port, timeout=60)
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read() if response.status == 200 else None
        conn.close()
    except OSError:
        body = None
    return time.perf_counter() - start, body


def run_clients(port: int, files: dict[str, bytes], clients: int, rounds: int, seed: int) -> dict:
    """``clients`` threads, each fetching every file ``rounds`` times in its own order."""
    latencies: list[float] = []
    errors, wrong = [0], [0]
    lock = threading.Lock()

    def client(k: int) -> None:
        order = [p for _ in range(rounds) for p in files]
        random.Random(seed + k).shuffle(order)
        for path in order:
            seconds, body = fetch(port, path)
            with lock:
                latencies.append(seconds)
                errors[0] += body is None
                wrong[0] += body is not None and body != files[path]

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ms = np.asarray(latencies) * 1000
    return {
        "requests": len(ms),
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        "max_ms": round(float(ms.max()), 2),
        "errors": errors[0],
        "wrong_bodies": wrong[0],
        "seconds": round(time.perf_counter() - start, 3),
    }


def watch_threads(pid: int, stop: threading.Event, peak: list[int]) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], status_of(pid)["Threads"])
        time.sleep(0.02)


def watch_idle(sockets: list[socket.socket], closed: list[float], limit: float) -> None:
    """Record, for each idle connection, the seconds after which the server closed it (``inf``:
    still open after ``limit`` seconds); runs beside the load, so the load's length does not count."""
    opened = time.perf_counter()
    for sock in sockets:
        sock.settimeout(max(limit - (time.perf_counter() - opened), 0.01))
        try:
            while sock.recv(1024):
                pass
            closed.append(time.perf_counter() - opened)
        except TimeoutError:
            closed.append(float("inf"))
        sock.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=50, help="concurrent clients fetching every file")
    p.add_argument("--idle", type=int, default=20, help="connections that send nothing, held open")
    p.add_argument("--rounds", type=int, default=1, help="times each client fetches every file")
    p.add_argument("--samples", type=int, default=1000, help="samples of the synthetic panel")
    p.add_argument("--strips", type=int, default=200, help="strip images of the synthetic panel")
    p.add_argument("--idle-timeout", type=float, default=5.0, help="the server's --idle-timeout")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="panel-load-"))
    try:
        panel = make_panel(tmp / "panel", args.samples, args.strips)
        files = {
            "/" + str(f.relative_to(panel)): f.read_bytes() for f in sorted(panel.rglob("*")) if f.is_file()
        }
        size = sum(len(b) for b in files.values())
        print(json.dumps({"bench": "panel_server", "files": len(files), "panel_mib": round(size / 2**20, 2)}))
        server, port = start_server(panel, args.idle_timeout)
        try:
            sequential = run_clients(port, files, 1, 1, args.seed)
            print(json.dumps({"bench": "panel_server", "scenario": "sequential", **sequential}))
            after_start = status_of(server.pid)

            idle, closed = [socket.create_connection((HOST, port)) for _ in range(args.idle)], []
            idle_watch = threading.Thread(target=watch_idle, args=(idle, closed, args.idle_timeout * 3 + 5))
            idle_watch.start()
            stop, threads = threading.Event(), [0]
            watcher = threading.Thread(target=watch_threads, args=(server.pid, stop, threads))
            watcher.start()
            load = run_clients(port, files, args.clients, args.rounds, args.seed)
            stop.set()
            watcher.join()
            ratio = round(load["p99_ms"] / max(sequential["p99_ms"], 1e-9), 2)
            print(
                json.dumps(
                    {
                        "bench": "panel_server",
                        "scenario": "load",
                        "clients": args.clients,
                        "idle": args.idle,
                        **load,
                        "p99_ratio_to_sequential": ratio,
                        "threads_max": threads[0],
                    }
                )
            )
            idle_watch.join()
            after_load = status_of(server.pid)
            mib = {
                k: round(v / 1024, 1)
                for k, v in (("start", after_start["VmHWM"]), ("load", after_load["VmHWM"]))
            }
            print(
                json.dumps(
                    {
                        "bench": "panel_server",
                        "metric": "peak_memory",
                        "peak_rss_mib_after_sequential": mib["start"],
                        "peak_rss_mib_after_load": mib["load"],
                        "ratio": round(mib["load"] / mib["start"], 2),
                    }
                )
            )
            print(
                json.dumps(
                    {
                        "bench": "panel_server",
                        "metric": "idle_connections",
                        "idle_timeout_s": args.idle_timeout,
                        "closed_by_server": int(np.isfinite(closed).sum()),
                        "of": len(closed),
                        "closed_after_s_max": round(max(closed), 2) if closed else None,
                    }
                )
            )
        finally:
            server.terminate()
            server.wait()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
