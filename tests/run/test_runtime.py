"""Runtime helpers that are not exercised elsewhere in the default suite."""

import dataclasses
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from proclab.errors import ProclabError
from proclab.run.distributed import connect_ray, deadline, gather_on_rank0, rank_and_world, start_training
from proclab.run.runtime import make_runtime, single_threaded


def test_ray_address_without_ray_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(ProclabError, match=r"pip install 'proclab\[distributed\]'"):
        connect_ray("auto")


def test_single_process_is_rank_zero_of_one():
    assert rank_and_world() == (0, 1)
    assert gather_on_rank0({"rng": 3}) == [{"rng": 3}]


def test_a_training_process_starts_checked_and_seeded_alike():
    @dataclasses.dataclass(frozen=True)
    class Config:  # what start_training asks of a trainer's config
        seed: int = 7
        checked: list = dataclasses.field(default_factory=list)

        def validate(self, world: int) -> None:
            self.checked.append(world)

        def runtime(self):
            return make_runtime("cpu", "fp32")

    config = Config()
    rank, world, rt = start_training(config)
    first = torch.rand(3)
    start_training(config)
    assert (rank, world, config.checked) == (0, 1, [1, 1]) and rt.device.type == "cpu"
    assert torch.equal(torch.rand(3), first)  # every start draws the same initial weights


def test_deadline_is_time_limit_from_now_or_never():
    assert deadline(0) is None
    assert 0 < deadline(60) - time.time() <= 60


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


@pytest.mark.parametrize("main_threads", [1, 2])
def test_a_worker_stays_single_threaded_whatever_the_main_thread_sets_before_its_first_operation(
    main_threads,
):
    """torch sets a thread's count at its first parallel operation, from the last count any thread set."""
    before = torch.get_num_threads()
    try:
        with ThreadPoolExecutor(1, initializer=single_threaded) as pool:
            pool.submit(lambda: None).result()  # the worker is up, and has computed nothing
            torch.set_num_threads(main_threads + 1)
            assert pool.submit(torch.get_num_threads).result() == 1
            with ThreadPoolExecutor(1, initializer=torch.set_num_threads, initargs=(1,)) as plain:
                plain.submit(lambda: None).result()
                torch.set_num_threads(main_threads + 1)
                assert (
                    plain.submit(torch.get_num_threads).result() == main_threads + 1
                )  # what happened before
    finally:
        torch.set_num_threads(before)
