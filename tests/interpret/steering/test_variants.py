"""Steering variants against element-by-element references: each row gets its own variant and value."""

import numpy as np
import torch

from proclab.interpret.steering.variants import AddLevelVector, WriteSites, variants_plan
from proclab.models import AgentConfig, build_agent
from proclab.models.edited import Intervened
from support import TINY_AGENT

HOOK = "torso.block1.hook_out"  # (8, 16, 16)
SHAPE = (8, 16, 16)


def activation(agent, obs, plan=None, codes=None, values=None):
    """The activation at HOOK (after the planned edits) on one fresh step: ``(B, 8, 16, 16)``."""
    edits = () if plan is None else plan(codes, values)
    with torch.no_grad():
        return Intervened(agent, edits).run_with_cache(obs, None, [HOOK])[2][HOOK][0]


def setup(seed=0):
    torch.manual_seed(seed)
    agent = build_agent(AgentConfig(core="none", **TINY_AGENT)).eval()
    obs = torch.randint(
        0, 256, (4, 3, 64, 64), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8
    )
    return agent, obs, activation(agent, obs).numpy()


def test_write_sites_per_row_position_and_variant():
    agent, obs, plain = setup(2)
    variants = [WriteSites((1, 3), (2.5, -1.0)), WriteSites((0,), (9.0,))]
    codes, values = (
        torch.tensor([0, 1, -1, 0]),
        torch.tensor([0.0, 7.0, 3.0, 37.0]),
    )  # flat positions y * 16 + x
    got = activation(agent, obs, variants_plan(HOOK, SHAPE, variants), codes, values).numpy()
    want = plain.copy()
    for r in range(4):
        if codes[r] < 0:
            continue
        y, x = divmod(int(values[r]), 16)
        v = variants[int(codes[r])]
        for c, m in zip(v.channels, v.magnitudes, strict=True):
            want[r, c, y, x] = m
    np.testing.assert_array_equal(got, want)


def test_add_level_vector_picks_each_rows_level():
    agent, obs, plain = setup(3)
    vectors = torch.randn((5, *SHAPE), generator=torch.Generator().manual_seed(4))
    levels = torch.tensor([4.0, 0.0, 4.0, 2.0])
    plan = variants_plan(HOOK, SHAPE, [AddLevelVector(vectors, -1.5)])
    got = activation(agent, obs, plan, torch.zeros(4, dtype=torch.long), levels).numpy()
    for r in range(4):
        np.testing.assert_allclose(
            got[r], plain[r] - 1.5 * vectors[int(levels[r])].numpy(), rtol=1e-5, atol=1e-6
        )
