"""The recording tests' fixtures, shared with tests/store through store_fixtures."""

from store_fixtures import checkpoint, helpers  # noqa: F401  (pytest finds fixtures by name in a conftest)
