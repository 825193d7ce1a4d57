"""Runtime helpers that are not exercised elsewhere in the default suite."""

import sys

import pytest
import torch

from proclab.errors import ProclabError
from proclab.run.distributed import connect_ray, gather_on_rank0, rank_and_world
from proclab.run.runtime import make_runtime


def test_ray_address_without_ray_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(ProclabError, match=r"pip install 'proclab\[distributed\]'"):
        connect_ray("auto")


def test_single_process_is_rank_zero_of_one():
    assert rank_and_world() == (0, 1)
    assert gather_on_rank0({"rng": 3}) == [{"rng": 3}]


def test_plain_cpu_runtimes_compute_whole_batches_on_intra_op_threads():
    """The layout (pieces, workers) is a run's choice (proclab.run.layout), not the runtime's."""
    threads = torch.get_num_threads()
    try:
        for precision in ("fp32", "bf16"):
            rt = make_runtime("cpu", precision, threads=2)
            assert (rt.compute_chunk, rt.workers, rt.acting_workers) == (0, 0, 0)
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


def test_runtime_map_keeps_order_and_runs_workers_single_threaded():
    rt = make_runtime("cpu", "fp32")
    items = list(range(7))
    assert list(rt.map(lambda i: i * i, items, 2)) == list(rt.map(lambda i: i * i, items, 0))
    assert set(rt.map(lambda _: torch.get_num_threads(), items, 2)) == {1}
