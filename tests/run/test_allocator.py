"""The CPU runtime keeps the memory a learner pass frees, so the next pass does not fault in fresh pages."""

import platform
import subprocess
import sys

import pytest

SCRIPT = """
import resource, sys, torch
import proclab.run.runtime as runtime
if sys.argv[1] == "plain":
    runtime.keep_freed_memory = lambda: None  # glibc's defaults
from proclab.models import build_agent
from proclab.rl.ppo import PPOLearner
from proclab.rl.ppo_layout import _random_batch
from proclab.command import parse_args
from proclab.run.layout import Layout
cfg, _ = parse_args(["--preset", "cleanrl", "--device", "cpu"])
rt = runtime.make_runtime("cpu", "fp32", threads=1)
agent = rt.prepare(build_agent(cfg.agent))
learner = PPOLearner(agent, cfg.ppo, Layout(128, "intra").apply(rt, 1), total_updates=1)
batch = _random_batch(256, rt.device, torch.Generator().manual_seed(0))
for _ in range(2):  # the heap grows to its peak once
    learner.gradients(batch)
counts = []
for _ in range(3):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    learner.gradients(batch)
    counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
# the quietest pass: a pass now and then can still extend the heap once (a thread's first arena use, a
# stack page), but with glibc's defaults every pass maps and returns the large blocks
print(min(counts))
"""


def faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


@pytest.mark.slow  # a learner pass at full size (16 s on 2 cores): make test-all
@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt"
)
def test_a_learner_pass_reuses_freed_memory_instead_of_faulting_in_fresh_pages():
    plain, kept = faults("plain"), faults("kept")
    # one 128-frame piece's first conv activations alone are 33.5 MB (8,192 pages) in fp32, past glibc's
    # 32 MiB mmap ceiling: by default they are mapped and returned on every pass
    assert plain > 8192, plain
    assert kept < plain / 20, (kept, plain)
