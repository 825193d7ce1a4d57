"""Settings for the whole test session."""

import os
import tempfile

import pytest


@pytest.fixture(autouse=True, scope="session")
def private_cache_dir():
    """Keep the user's cache (chosen learner layouts) out of the tests, and the tests out of it: a
    fresh ``XDG_CACHE_HOME`` for this session, seen by the ``proclab`` subprocesses too."""
    old = os.environ.get("XDG_CACHE_HOME")
    with tempfile.TemporaryDirectory(prefix="proclab-test-cache-") as root:
        os.environ["XDG_CACHE_HOME"] = root
        yield root
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old
