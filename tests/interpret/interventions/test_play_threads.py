"""The analyses' play (steering, the sweep, goal watching) acts on one intra-op thread on a CPU, as
``proclab.rollout`` does (docs/benchmarks.md: torch's default of every core ran a rollout 9x slower on a busy
2-core machine), and gives the caller's thread count back after."""

import numpy as np
import torch

from planted_grid import GoalSeeker, Grid
from proclab.interpret.interventions.batched_play import play
from proclab.run.runtime import make_runtime


def test_play_acts_on_one_thread_and_restores_the_count():
    agent = GoalSeeker()
    seen: list[int] = []
    policy = agent.policy
    agent.policy = lambda *a: (seen.append(torch.get_num_threads()), policy(*a))[1]
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        levels = np.arange(3)
        play(agent, None, Grid(4), levels, np.array([-1]), np.zeros((1, 3)), make_runtime("cpu", "fp32"))
        assert seen and set(seen) == {1}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
