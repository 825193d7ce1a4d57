"""Same-norm controls of a steering vector and the walk comparison that tells "blind to the goal" from
"broken", on the planted grid agent (tests/planted_grid.py), whose goal channel is known."""

import numpy as np
import pytest
import torch

from planted_grid import GoalSeeker, Grid
from proclab.interpret.interventions.batched_play import play
from proclab.interpret.steering.reach import agreement
from proclab.interpret.steering.steer import rank_among_draws
from proclab.interpret.steering.variants import AddLevelVector, variants_plan
from proclab.interpret.steering.vectors import contrast_vector, random_directions, same_norm
from proclab.models.edited import Intervened, hook_shapes
from proclab.run.runtime import make_runtime

HOOK = "torso.hook_map"
LEVELS = np.arange(200, 240)
DRAWS = 20


def test_random_directions_have_each_levels_norm_and_differ_by_draw():
    norms = torch.tensor([1.0, 2.5, 0.0, 7.0])
    r = random_directions((2, 8, 8), norms, 5, seed=3, shared=False)
    assert r.shape == (5, 4, 2, 8, 8)
    np.testing.assert_allclose(r.flatten(2).norm(dim=2).numpy(), np.tile(norms.numpy(), (5, 1)), atol=1e-5)
    cos = torch.nn.functional.cosine_similarity(r[0, 0].flatten(), r[1, 0].flatten(), dim=0)
    assert abs(float(cos)) < 0.5  # independent draws, not one direction rescaled
    shared = random_directions((2, 8, 8), norms, 2, seed=3, shared=True)
    a, b = shared[0, 0].flatten(), shared[0, 3].flatten()
    assert float(torch.nn.functional.cosine_similarity(a, b, dim=0)) == pytest.approx(1.0, abs=1e-6)
    scaled = same_norm(torch.ones(2, 3), torch.tensor([3.0, 0.0]))
    np.testing.assert_allclose(scaled.numpy(), [[np.sqrt(3)] * 3, [0.0] * 3], atol=1e-6)


def test_rank_among_draws_matches_counting_by_hand():
    rng = np.random.default_rng(0)
    for _ in range(50):
        changes = rng.choice([-0.2, -0.1, 0.0, 0.05, 0.1], size=20)
        vector = float(rng.choice([-0.3, -0.1, 0.0, 0.1]))
        if vector == 0:
            k = 20
        else:
            k = sum(1 for c in changes if (c <= vector if vector < 0 else c >= vector))
        got = rank_among_draws(vector, changes)
        assert got["draws_as_extreme"] == k and got["p_rank"] == pytest.approx((1 + k) / 21)


def test_agreement_is_the_share_of_common_steps_in_the_same_cell():
    a = [(0, 0), (1, 0), (2, 0), (3, 0)]
    b = [(0, 0), (1, 1), (2, 0)]
    assert agreement(a, b) == pytest.approx(2 / 3) and agreement(a, a) == 1.0
    assert np.isnan(agreement([], b))


class GoalHidden(Grid):
    """The grid with the goal drawn nowhere: what the agent sees when the goal is removed."""

    def observe(self):
        frames = super().observe()
        frames[:, 1] = 0
        return frames


class Walks:
    def __init__(self, env, variants, levels):
        self.env, self.V = env, variants
        self.cells = [[[] for _ in range(levels)] for _ in range(variants)]

    def __call__(self, rows, jobs, ended, actions):
        for r, job in zip(rows[~ended], jobs[~ended], strict=True):
            level, v = divmod(int(job), self.V)
            self.cells[v][level].append(tuple(self.env.agent[r]))


def level_vectors(agent, levels):
    """Each level's own with-minus-without-goal activation difference (one frame per level)."""
    env = Grid(1)
    out = []
    for lv in levels:
        env.load(0, env.level_state(int(lv)))
        frame = env.observe()
        blind = frame.copy()
        blind[:, 1] = 0
        out.append(contrast_vector(agent, HOOK, frame, blind))
    return torch.stack(out)


def test_the_goal_vector_lies_beyond_same_norm_random_draws_and_walks_as_the_blind_agent():
    """Planted: subtracting each level's own goal difference erases the goal from the agent's map, so it
    walks exactly as the plain agent does on the level without the goal (agreement 1) and stops
    completing levels; random directions of the same norm leave the goal the map's maximum, so they
    neither stop it nor make it walk like the blind agent. A measure that could not tell the two (a
    vector of the same size that merely broke the agent) would rank the vector among the draws."""
    agent = GoalSeeker()
    vectors = level_vectors(agent, LEVELS)
    norms = vectors.flatten(1).norm(dim=1)
    assert torch.allclose(norms, torch.ones(len(LEVELS)))
    random = random_directions(hook_shapes(agent)[HOOK], norms, DRAWS, seed=0, shared=False)
    variants = [AddLevelVector(vectors, -1.0), *(AddLevelVector(random[d], -1.0) for d in range(DRAWS))]
    V, L = len(variants) + 1, len(LEVELS)
    env = Grid(16)
    walks = Walks(env, V, L)
    values = np.repeat(np.arange(L, dtype=np.float64)[None], V, 0)
    rt = make_runtime("cpu", "fp32")
    plan = variants_plan(HOOK, hook_shapes(agent)[HOOK], variants)
    out = play(Intervened(agent), plan, env, LEVELS, np.arange(-1, V - 1), values, rt, watch=walks)
    blind_env = GoalHidden(16)
    blind = Walks(blind_env, 1, L)
    play(agent, None, blind_env, LEVELS, np.array([-1]), np.zeros((1, L)), rt, watch=blind)

    complete = out.complete > 0
    changes = complete[2:].mean(1) - complete[0].mean()
    vector_change = complete[1].mean() - complete[0].mean()
    assert complete[0].all() and vector_change < -0.5 and np.abs(changes).max() == 0
    assert rank_among_draws(vector_change, changes) == {"draws_as_extreme": 0, "p_rank": 1 / 21}

    def agree(v):
        return np.nanmean([agreement(walks.cells[v][lv], blind.cells[0][lv]) for lv in range(L)])

    assert agree(1) == 1.0  # the steered agent walks where the agent that cannot see the goal walks
    assert max(agree(v) for v in range(2, V)) < 0.9 and agree(0) < 0.9
