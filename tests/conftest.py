"""Settings for the whole test session, and a web server on the loopback for the download tests."""

import functools
import http.server
import os
import tempfile
import threading
from pathlib import Path

import pytest


@pytest.fixture(autouse=True, scope="session")
def private_cache_dir():
    """Keep the user's cache (chosen learner layouts, downloaded agents) out of the tests, and the tests
    out of it: a fresh ``XDG_CACHE_HOME`` for this session and no ``PROCLAB_CACHE``, seen by the
    ``proclab`` subprocesses too."""
    old = {name: os.environ.pop(name, None) for name in ("XDG_CACHE_HOME", "PROCLAB_CACHE")}
    with tempfile.TemporaryDirectory(prefix="proclab-test-cache-") as root:
        os.environ["XDG_CACHE_HOME"] = root
        yield root
    for name, value in old.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


class Loopback:
    """A web server on 127.0.0.1 (a free port) serving the files of ``folder``, counting the requests it
    answers; the downloads under test reach it and nothing else."""

    def __init__(self, folder: Path):
        self.folder, self.requests = folder, []
        handler = functools.partial(_QuietHandler, directory=str(folder), requests=self.requests)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{name}"

    def stop(self) -> None:
        """Shut the server and close its port: a request now finds no one."""
        if self.thread.is_alive():
            self.server.shutdown()
            self.thread.join()
        self.server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, requests: list, **kwargs):
        self._requests = requests
        super().__init__(*args, **kwargs)

    def do_GET(self):
        self._requests.append(self.path)
        super().do_GET()

    def log_message(self, *args):  # the test's output, not the server's log
        pass


@pytest.fixture
def loopback(tmp_path, monkeypatch):
    """A :class:`Loopback` serving ``tmp_path / "served"`` (reached directly, whatever proxy the
    environment names), stopped after the test."""
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    folder = tmp_path / "served"
    folder.mkdir()
    server = Loopback(folder)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def ray_cluster():
    """A Ray cluster of two nodes of one CPU each on this machine (head and worker, ``ray start`` on 127.0.0.1,
    its own temporary folder and free ports), stopped after the session; skips without Ray."""
    pytest.importorskip("ray")
    from proclab.run.local_cluster import LocalCluster

    with LocalCluster(2, 1, env={"OMP_NUM_THREADS": "1"}) as cluster:
        yield cluster
