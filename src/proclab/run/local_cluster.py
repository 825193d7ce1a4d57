"""A Ray cluster of several nodes on this machine: a head and workers started with ``ray start``, then stopped.

What runs on a cluster (``--ray ADDRESS``) is tried, tested and measured without one: every node is a
``ray start`` with 127.0.0.1 as its address (the dashboard bound there too) and its own CPUs, all of them in one
fresh temporary folder and on free ports, so that two clusters (or a cluster and a user's own) never meet.
Ray 2.60 still opens some of its own ports on every interface (GCS, raylets, agents; ``ss -ltnp`` shows them),
with no switch to narrow them: on a machine others can reach, a firewall keeps them in. :meth:`LocalCluster.stop` ends only this cluster's processes (those whose command line
names its folder, and their children), never ``ray stop``, which would end every Ray process of the machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from proclab.errors import ProclabError

HOST = "127.0.0.1"
OBJECT_STORE = 200 * 2**20
"""Bytes of each node's object store: units return small results (their outputs go to files)."""


@dataclass(frozen=True)
class Process:
    """A process of the machine as ``ps`` shows it: its id, parent and command line (a Ray worker's is its
    title, ``ray::FUNCTION`` while it runs a task)."""

    pid: int
    parent: int
    command: str


def processes() -> list[Process]:
    """Every process of the machine (``ps``, at full width whatever COLUMNS says: Linux and macOS)."""
    out = subprocess.run(
        ["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True
    ).stdout
    rows = (line.split(None, 2) for line in out.splitlines())
    return [
        Process(int(row[0]), int(row[1]), row[2] if len(row) > 2 else "") for row in rows if len(row) >= 2
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class LocalCluster:
    """``nodes`` Ray nodes of ``cpus`` CPUs each on this machine; ``with LocalCluster(2) as cluster:`` starts
    it, ``cluster.address`` is what ``--ray`` takes, and leaving the block stops it. ``env`` is added to the
    environment of the nodes (and so of their workers), e.g. ``OMP_NUM_THREADS``."""

    def __init__(
        self, nodes: int = 2, cpus: int = 1, *, env: dict[str, str] | None = None, dashboard: bool = True
    ):
        if nodes < 1 or cpus < 1:
            raise ProclabError(f"a local cluster needs nodes >= 1 and cpus >= 1, got {nodes} and {cpus}")
        self.nodes, self.cpus, self.dashboard = nodes, cpus, dashboard
        self.env = {**os.environ, **(env or {})}
        self.env.pop("RAY_ADDRESS", None)  # a node joins the head it is given, not the caller's cluster
        self.folder: Path | None = None
        self.address = ""
        self.dashboard_url = ""

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _ray(self, *args: str) -> None:
        ray = Path(sys.executable).with_name("ray")
        if not ray.is_file():
            raise ProclabError("a local Ray cluster needs Ray: pip install 'proclab[distributed]'")
        done = subprocess.run([str(ray), "start", *args], env=self.env, capture_output=True, text=True)
        if done.returncode != 0:
            raise ProclabError(
                f"ray start failed: {done.stderr.strip().splitlines()[-1:] or done.returncode}"
            )

    def start(self) -> str:
        """Start the head, then the other nodes; returns the head's address (``127.0.0.1:PORT``)."""
        # short: Ray's sockets live under it, and a Unix socket's path has at most 107 characters
        self.folder = Path(tempfile.mkdtemp(prefix="proclab-ray-", dir="/tmp"))
        port = _free_port()
        common = ["--node-ip-address", HOST, "--num-cpus", str(self.cpus), "--num-gpus", "0",
                  "--temp-dir", str(self.folder), "--disable-usage-stats",
                  "--object-store-memory", str(OBJECT_STORE)]  # fmt: skip
        try:
            dashboard = _free_port()
            self._ray("--head", "--port", str(port), *common, "--include-dashboard", str(self.dashboard).lower(),
                      "--dashboard-host", HOST, "--dashboard-port", str(dashboard),
                      "--dashboard-agent-listen-port", str(_free_port()),
                      "--ray-client-server-port", str(_free_port()))  # fmt: skip
            self.address = f"{HOST}:{port}"
            self.dashboard_url = f"http://{HOST}:{dashboard}" if self.dashboard else ""
            for _ in range(self.nodes - 1):
                self._ray(
                    "--address", self.address, *common, "--dashboard-agent-listen-port", str(_free_port())
                )
        except BaseException:
            self.stop()
            raise
        return self.address

    def processes(self) -> list[Process]:
        """This cluster's processes: those whose command line names its folder, and all their descendants (the
        workers, whose titles no longer name it)."""
        if self.folder is None:
            return []
        every = processes()
        mine = {p.pid for p in every if str(self.folder) in p.command}
        grown = True
        while grown:
            more = {p.pid for p in every if p.parent in mine} - mine
            grown = bool(more)
            mine |= more
        return [p for p in every if p.pid in mine]

    def running(self, function: str) -> list[Process]:
        """This cluster's workers running a task of ``function`` (Ray titles them ``ray::FUNCTION``)."""
        return [p for p in self.processes() if p.command.split(None, 1)[:1] == [f"ray::{function}"]]

    def stop(self, grace: float = 10.0) -> None:
        """End this cluster's processes (SIGTERM, then SIGKILL after ``grace`` seconds) and remove its folder."""
        if self.folder is None:
            return
        ours: set[int] = set()  # a worker whose raylet ended first leaves the tree: it is still ours

        def alive() -> list[int]:
            ours.update(p.pid for p in self.processes())
            return [p.pid for p in processes() if p.pid in ours]

        for sig in (signal.SIGTERM, signal.SIGKILL):
            left = alive()
            for pid in left:
                with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                    os.kill(pid, sig)
            end = time.monotonic() + grace
            while left and time.monotonic() < end:
                time.sleep(0.2)
                left = alive()
            if not left:
                break
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None
