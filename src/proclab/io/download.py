"""Files fetched over HTTP(S) into a cache, kept only when their SHA-256 is the one expected.

proclab downloads only what one of its tables names together with the file's hash (the published
agents, ``proclab.models.importers.published``). A download streams into a hidden temporary beside
its destination, is hashed on the way, and is renamed into place only when the hash matches
(``io.files.replacing``), so the destination holds the expected bytes or nothing: a wrong file, a
server error, a dropped connection or a killed process leaves no file under the real name. A
destination that already holds the expected bytes is used as it is, without the network, so a
cache filled once (or by hand) works offline. ``urllib`` does one GET; no dependency is needed.
"""

from __future__ import annotations

import hashlib
import http.client
import urllib.error
import urllib.request
from pathlib import Path

from rich.progress import (
    BarColumn,
    DownloadColumn,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from proclab.errors import ProclabError
from proclab.io.files import remove, replacing, sweep_temporaries
from proclab.io.progress import progress_bar

CHUNK = 1 << 16
TIMEOUT_S = 30.0
"""Seconds a connection may stay silent (to connect, or between two reads) before the download fails."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def download(url: str, sha256: str, dest: str | Path, what: str = "file", size: int | None = None) -> Path:
    """``dest``, holding the bytes of ``url`` whose SHA-256 is ``sha256``: the file already there if its
    hash matches, otherwise downloaded now (with a progress bar; ``size`` in bytes sizes the bar when the
    server does not say). A file there with other bytes (a damaged cache) is removed first. Every failure
    is one :class:`ProclabError` line naming the URL, and leaves nothing at ``dest``."""
    dest = Path(dest)
    if dest.is_file():
        if sha256_of(dest) == sha256:
            return dest
        remove(dest)
    sweep_temporaries(dest.parent)  # what a killed download left
    with replacing(dest, what) as tmp:
        got = _fetch(url, tmp, what, size)
        if got != sha256:
            raise ProclabError(
                f"the {what} downloaded from {url} has SHA-256 {got}, not the expected {sha256}; it was "
                "deleted and nothing was kept"
            )
    return dest


def _fetch(url: str, tmp: Path, what: str, size: int | None) -> str:
    """Stream ``url`` into ``tmp``; the SHA-256 of what was written."""
    digest = hashlib.sha256()
    columns = (TextColumn(what), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response, open(tmp, "wb") as out:
            total = int(response.headers.get("Content-Length") or size or 0) or None
            with progress_bar(*columns) as progress:
                task = progress.add_task(what, total=total)
                while chunk := response.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                    progress.advance(task, len(chunk))
    except urllib.error.HTTPError as err:
        raise _unreachable(url, what, f"the server answered HTTP {err.code} {err.reason}") from None
    except urllib.error.URLError as err:
        raise _unreachable(url, what, f"no connection: {err.reason}") from None
    except (TimeoutError, ConnectionError, http.client.HTTPException) as err:
        raise _unreachable(url, what, f"the connection failed: {str(err) or type(err).__name__}") from None
    return digest.hexdigest()


def _unreachable(url: str, what: str, why: str) -> ProclabError:
    return ProclabError(
        f"cannot download the {what} from {url} ({why}); download the file by hand and pass its path instead"
    )
