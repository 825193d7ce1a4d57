"""The level tests' fixtures, shared with tests/record through level_fixtures."""

from level_fixtures import coin_file, coin_on_agent  # noqa: F401  (pytest finds fixtures by name in a conftest)
