import pytest

from proclab.run.runtime import make_runtime


@pytest.fixture
def fp32():
    return make_runtime("cpu", "fp32")
