"""A local static server for an exported panel folder.

The panel is plain files, so any static host serves it; this one exists for opening a panel
on one's own machine safely. It binds 127.0.0.1 only (nothing on the network can reach it),
answers GET and HEAD only, and serves a file only when its fully resolved path (symlinks
followed) lies inside the panel folder. A request path is percent-decoded exactly once; a
segment that is ``.`` or ``..`` or that still holds ``%`` (a double-encoded form),
a backslash or a NUL after decoding is refused, so no spelling of a traversal reaches the
file system. Every refusal is a plain 404, which tells a prober nothing.

**Under load.** Each connection has its own thread, so a slow or idle client never holds up
another, and a connection that sends nothing for ``idle_timeout`` seconds (a client that opened
it and went away, or a slowloris sending no complete line) is closed, so idle connections do
not pile up. Files are streamed from disk (``sendfile``), so memory does not grow with the
number of clients or the size of the panel. ``benchmarks/panel_server_load.py`` measures the
latency and peak memory with 50 concurrent clients fetching every file of a panel beside 20
idle connections (docs/reliability.md has the numbers).
"""

from __future__ import annotations

import mimetypes
import os
import signal
import webbrowser
from functools import partial
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

from proclab.errors import ProclabError

HOST = "127.0.0.1"
IDLE_TIMEOUT = 10.0
"""Seconds a connection may stay silent (waiting for a request line or header) before it is closed."""
TYPES = {".js": "text/javascript", ".json": "application/json", ".css": "text/css", ".html": "text/html"}


def resolve_request(root: Path, raw_path: str) -> Path | None:
    """The file inside ``root`` (already resolved) that ``raw_path`` names, or None (a 404)."""
    path = raw_path.split("?", 1)[0].split("#", 1)[0]
    if not path.startswith("/"):  # absolute-URI or garbage request targets
        return None
    decoded = unquote(path, errors="strict")
    parts = [p for p in decoded.split("/") if p]
    for part in parts:
        if part in (".", "..") or any(c in part for c in "%\\\x00"):
            return None
    candidate = root.joinpath(*parts) if parts else root
    try:
        resolved = candidate.resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        return None
    if resolved.is_dir():
        resolved = resolved / "index.html"
        if not resolved.is_file():
            return None
        resolved = resolved.resolve()
    if not resolved.is_file() or not resolved.is_relative_to(root):
        return None
    return resolved


class PanelServer(ThreadingHTTPServer):
    """One thread per connection (daemon threads: Ctrl-C never waits for a client), and a listen
    backlog deep enough for a burst of connections: the default of 5 makes the kernel drop the
    rest, whose clients then wait seconds before their connection is retried."""

    daemon_threads = True
    request_queue_size = 128


class PanelHandler(BaseHTTPRequestHandler):
    """GET/HEAD of files inside ``root``; anything else is 404 (paths) or 405 (methods)."""

    server_version = "proclab-panel"
    sys_version = ""

    def __init__(self, *args, root: Path, quiet: bool, idle_timeout: float, **kwargs):
        self.root = root
        self.quiet = quiet
        self.timeout = idle_timeout  # read by StreamRequestHandler.setup: the socket's timeout
        super().__init__(*args, **kwargs)

    def _send_file(self, body: bool) -> None:
        try:
            file = resolve_request(self.root, self.path)
        except UnicodeDecodeError:
            file = None
        if file is None:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        kind = TYPES.get(file.suffix) or mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        with open(file, "rb") as f:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
            self.send_header("Cache-Control", "no-cache")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            if body:
                self.connection.sendfile(f)

    def do_GET(self) -> None:
        self._send_file(body=True)

    def do_HEAD(self) -> None:
        self._send_file(body=False)

    def _refuse(self) -> None:
        self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
        self.send_header("Allow", "GET, HEAD")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _refuse

    def log_message(self, format: str, *args) -> None:
        if not self.quiet:
            super().log_message(format, *args)


def make_server(
    panel: Path, port: int = 0, quiet: bool = False, idle_timeout: float = IDLE_TIMEOUT
) -> ThreadingHTTPServer:
    """A server for ``panel`` on 127.0.0.1:``port`` (0: a free port, read it from ``server_port``)."""
    root = Path(panel).resolve()
    if not (root / "index.html").is_file():
        raise ProclabError(
            f"{str(panel)!r} is not a panel folder (no index.html); make one with `proclab panel export`"
        )
    if not 0 <= port <= 65535:
        raise ProclabError(f"--port {port} is not a TCP port; give 0 (a free port) to 65535")
    if not idle_timeout > 0:
        raise ProclabError(f"--idle-timeout {idle_timeout} must be a positive number of seconds")
    try:
        handler = partial(PanelHandler, root=root, quiet=quiet, idle_timeout=idle_timeout)
        server = PanelServer((HOST, port), handler)
    except OSError as err:
        raise ProclabError(
            f"cannot listen on {HOST}:{port} ({err.strerror}); use --port 0 for a free port"
        ) from None
    return server


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://{HOST}:{server.server_port}/"


def serve(panel: Path, port: int = 0, open_browser: bool = False, idle_timeout: float = IDLE_TIMEOUT) -> None:
    """Serve until Ctrl-C, then close the socket and return.

    Ctrl-C is made to raise KeyboardInterrupt here whatever the parent did: a process started with
    SIGINT ignored (as some launchers and test runners start their children) inherits that, and
    Python then installs no handler, so the server would never stop on Ctrl-C."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    server = make_server(panel, port, idle_timeout=idle_timeout)
    url = url_of(server)
    print(f"serving {Path(panel).resolve()} at {url} (Ctrl-C stops)", flush=True)
    if open_browser:
        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    print("panel server stopped", flush=True)
