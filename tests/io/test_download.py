"""Downloads into a cache: kept only with the expected SHA-256, atomic, offline once cached, one-line errors.

Every download here reaches a web server on 127.0.0.1 (the ``loopback`` fixture), never the internet.
"""

from __future__ import annotations

import hashlib

import pytest

from proclab.errors import ProclabError
from proclab.io.download import download

DATA = bytes(range(256)) * 1000  # several chunks
SHA = hashlib.sha256(DATA).hexdigest()


def _refused(match: str, *args) -> str:
    with pytest.raises(ProclabError, match=match) as err:
        download(*args)
    assert "\n" not in str(err.value)
    return str(err.value)


def _left(folder) -> list[str]:
    return sorted(p.name for p in folder.rglob("*")) if folder.exists() else []


def test_downloads_once_then_uses_the_cached_file_offline(loopback, tmp_path):
    (loopback.folder / "agent.pth").write_bytes(DATA)
    dest = tmp_path / "cache" / "sub" / "agent.pth"
    assert download(loopback.url("agent.pth"), SHA, dest, "agent", len(DATA)) == dest
    assert dest.read_bytes() == DATA and loopback.requests == ["/agent.pth"]
    loopback.stop()
    assert download(loopback.url("agent.pth"), SHA, dest) == dest  # no network: the hash matches
    assert _left(tmp_path / "cache") == ["agent.pth", "sub"]  # no temporary left behind


def test_a_wrong_hash_is_refused_and_nothing_is_kept(loopback, tmp_path):
    (loopback.folder / "agent.pth").write_bytes(DATA)
    wrong = "0" * 64
    message = _refused("has SHA-256", loopback.url("agent.pth"), wrong, tmp_path / "cache" / "agent.pth")
    assert SHA in message and wrong in message and "deleted" in message
    assert _left(tmp_path / "cache") == []


def test_a_damaged_cached_file_is_fetched_again(loopback, tmp_path):
    (loopback.folder / "agent.pth").write_bytes(DATA)
    dest = tmp_path / "agent.pth"
    dest.write_bytes(DATA[:100])  # a truncated copy
    download(loopback.url("agent.pth"), SHA, dest)
    assert dest.read_bytes() == DATA and len(loopback.requests) == 1


def test_server_errors_and_no_connection_are_one_line_naming_the_url(loopback, tmp_path):
    url = loopback.url("missing.pth")
    message = _refused("HTTP 404", url, SHA, tmp_path / "cache" / "agent.pth")
    assert url in message and "by hand" in message
    loopback.stop()
    (loopback.folder / "agent.pth").write_bytes(DATA)
    url = loopback.url("agent.pth")
    message = _refused("no connection", url, SHA, tmp_path / "cache" / "agent.pth")
    assert url in message and "pass its path" in message
    assert _left(tmp_path / "cache") == []
