import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny tensors: one thread avoids oversubscribing the cores that pytest-xdist workers share."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
