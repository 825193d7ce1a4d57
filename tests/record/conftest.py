"""The recording tests' fixtures, shared with tests/store and tests/levels through their fixture modules."""

from level_fixtures import coin_file, coin_on_agent  # noqa: F401  (pytest finds fixtures by name in a conftest)
from store_fixtures import checkpoint, helpers  # noqa: F401
