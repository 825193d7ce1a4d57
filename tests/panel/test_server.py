"""The panel server: 127.0.0.1 only, GET/HEAD only, and no request path reaches outside PANEL."""

import http.client
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from proclab.errors import ProclabError
from proclab.panel.server import make_server

SECRET = b"outside the panel"


@pytest.fixture
def served(tmp_path):
    """A panel folder beside a secret file, with symlinks in and out, served on a free port."""
    (tmp_path / "secret.txt").write_bytes(SECRET)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_bytes(SECRET)
    panel = tmp_path / "panel"
    (panel / "data").mkdir(parents=True)
    (panel / "index.html").write_text("<html>panel</html>")
    (panel / "data" / "panel.json").write_text('{"a": 1}')
    (panel / "data" / "link_in.json").symlink_to(panel / "data" / "panel.json")
    (panel / "link_out.txt").symlink_to(tmp_path / "secret.txt")
    (panel / "dir_out").symlink_to(tmp_path / "outside")
    (panel / "%2e%2e").mkdir()  # a folder literally named like an encoded traversal
    (panel / "%2e%2e" / "secret.txt").write_bytes(SECRET)
    server = make_server(panel, 0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield tmp_path, server.server_port
    server.shutdown()
    server.server_close()
    thread.join()


def request(port: int, path: str, method: str = "GET") -> tuple[int, bytes, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest(method, path, skip_host=False, skip_accept_encoding=True)
    conn.endheaders()
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, body, dict(response.getheaders())


def test_serves_files_inside_with_types(served):
    _, port = served
    status, body, headers = request(port, "/")
    assert (status, body) == (200, b"<html>panel</html>")
    assert headers["Content-Type"] == "text/html"
    status, body, headers = request(port, "/data/panel.json?v=1#frag")
    assert (status, body, headers["Content-Type"]) == (200, b'{"a": 1}', "application/json")
    assert request(port, "/data/link_in.json")[:2] == (200, b'{"a": 1}')  # a symlink that stays inside
    status, body, headers = request(port, "/data/panel.json", "HEAD")
    assert (status, body, headers["Content-Length"]) == (200, b"", "8")


@pytest.mark.parametrize(
    "path",
    [
        "/../secret.txt",
        "/data/../../secret.txt",
        "/./../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/.%2e/secret.txt",
        "/%2e%2e%2fsecret.txt",
        "/..%2fsecret.txt",
        "/data/%2e%2e%2f%2e%2e%2fsecret.txt",
        "/%252e%252e/secret.txt",  # double-encoded: must not be decoded twice
        "/%252e%252e%252fsecret.txt",
        "/..%5csecret.txt",
        "/..\\secret.txt",
        "/%2e%2e%5csecret.txt",
        "/data%00/panel.json",
        "//etc/passwd",
        "/etc/passwd",
        "../secret.txt",
        "http://127.0.0.1/../secret.txt",
        "/link_out.txt",  # symlink to a file outside
        "/dir_out/secret.txt",  # symlinked folder outside
        "/%c0%ae%c0%ae/secret.txt",  # overlong UTF-8 dots
        "/missing.html",
    ],
)
def test_every_traversal_form_is_404(served, path):
    _tmp, port = served
    status, body, _ = request(port, path)
    assert status == 404, path
    assert SECRET not in body


def test_absolute_path_of_a_file_outside_is_404(served):
    tmp, port = served
    assert request(port, str(tmp / "secret.txt"))[0] == 404
    assert request(port, "/" + str(tmp / "secret.txt"))[0] == 404


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"])
def test_only_get_and_head(served, method):
    _, port = served
    status, _, headers = request(port, "/index.html", method)
    assert status == 405 and headers["Allow"] == "GET, HEAD"


def test_free_port_choice_and_loopback(tmp_path):
    (tmp_path / "index.html").write_text("x")
    a, b = make_server(tmp_path, 0, quiet=True), make_server(tmp_path, 0, quiet=True)
    try:
        assert a.server_address[0] == b.server_address[0] == "127.0.0.1"
        assert a.server_port > 0 and b.server_port > 0 and a.server_port != b.server_port
        with pytest.raises(ProclabError, match="--port 0"):  # a port in use names the way out
            make_server(tmp_path, a.server_port, quiet=True)
    finally:
        a.server_close()
        b.server_close()


def test_refuses_a_folder_without_index(tmp_path):
    with pytest.raises(ProclabError, match="not a panel folder"):
        make_server(tmp_path, 0)
    (tmp_path / "index.html").write_text("x")
    with pytest.raises(ProclabError, match="not a TCP port"):
        make_server(tmp_path, 70000)


def test_cli_prints_url_and_stops_cleanly_on_ctrl_c(tmp_path):
    """Also when started with SIGINT ignored, as some launchers (and pytest-xdist workers) start children."""
    (tmp_path / "index.html").write_text("served by the cli")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "proclab", "panel", "serve", str(tmp_path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        line = proc.stdout.readline()
        url = line.split(" at ")[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        assert request(port, "/")[:2] == (200, b"served by the cli")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "panel server stopped" in out
    assert "Traceback" not in err


def test_idle_connections_are_closed_and_never_block_other_clients(tmp_path):
    """20 connections that send nothing and one that stalls mid-request do not delay a real request,
    and the server closes all of them once they have been silent for the idle timeout."""
    import socket

    (tmp_path / "index.html").write_text("<html>panel</html>")
    server = make_server(tmp_path, 0, quiet=True, idle_timeout=0.5)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        idle = [socket.create_connection(("127.0.0.1", server.server_port)) for _ in range(20)]
        stalled = socket.create_connection(("127.0.0.1", server.server_port))
        stalled.sendall(b"GET /index.html HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        assert request(server.server_port, "/index.html")[:2] == (200, b"<html>panel</html>")
        for sock in [*idle, stalled]:
            sock.settimeout(10)  # far beyond the server's 0.5 s: a hang, not a speed, is what fails
            while sock.recv(1024):  # the server closes it: recv returns b"" instead of timing out
                pass
            sock.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    with pytest.raises(ProclabError, match="--idle-timeout 0"):
        make_server(tmp_path, 0, idle_timeout=0)
