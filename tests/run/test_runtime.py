"""Runtime helpers that are not exercised elsewhere in the default suite."""

import sys

import pytest

from proclab.errors import ProclabError
from proclab.run.distributed import connect_ray, gather_on_rank0, rank_and_world
from proclab.run.runtime import CPU_COMPUTE_CHUNK, make_runtime


def test_ray_address_without_ray_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(ProclabError, match=r"pip install 'proclab\[distributed\]'"):
        connect_ray("auto")


def test_single_process_is_rank_zero_of_one():
    assert rank_and_world() == (0, 1)
    assert gather_on_rank0({"rng": 3}) == [{"rng": 3}]


def test_fp32_cpu_learners_use_cache_sized_pieces():
    assert make_runtime("cpu", "fp32").compute_chunk == CPU_COMPUTE_CHUNK > 0
    assert make_runtime("cpu", "bf16").compute_chunk == 0  # the bf16 path keeps whole minibatches
