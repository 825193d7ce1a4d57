"""Settings for the whole test session."""

import os
import tempfile

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
