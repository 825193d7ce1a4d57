"""The planted test: the spatial probe finds the channel that encodes the goal's position, writing a
target into it moves the agent there (and the same edit on another channel does not), and the null
agent shows nothing after correction."""

import numpy as np
import pytest
import torch

from planted_grid import SIZE, GoalSeeker, Grid
from proclab.interpret.interventions.batched_play import play
from proclab.interpret.probes.spatial import centres_of_mass, track_channels
from proclab.interpret.steering.variants import AddLevelVector, WriteSites, variants_plan
from proclab.interpret.steering.vectors import contrast_vector
from proclab.models.edited import Intervened, hook_shapes
from proclab.models.hooks import capture
from proclab.run.runtime import make_runtime

HOOK = "torso.hook_map"
LEVELS = np.arange(100, 140)


def recorded_maps(agent, levels=LEVELS, steps=3):
    """Maps at the hook and goal pixels over the first steps of each level (plain play)."""
    env = Grid(len(levels))
    for slot, lv in enumerate(levels):
        env.load(slot, env.level_state(int(lv)))
    maps, goals, episode = [], [], []
    for _ in range(steps):
        obs = torch.as_tensor(env.observe())
        with torch.no_grad(), capture(agent, HOOK, detach=True) as acts:
            out, _ = agent.step(obs, {}, torch.ones(len(obs), dtype=torch.bool))
        maps.append(acts[HOOK].numpy())
        goals.append(env.goal_pixels())
        episode.append(np.asarray(levels))
        env.step(out.logits.argmax(1).numpy())
    return np.concatenate(maps), np.concatenate(goals).astype(float), np.concatenate(episode)


@pytest.mark.parametrize("null", [False, True])
def test_spatial_probe_finds_the_goal_channel_and_nothing_in_the_null_agent(null):
    maps, goals, episode = recorded_maps(GoalSeeker(null=null))
    rows = track_channels(centres_of_mass(maps), goals, episode, permutations=200, bootstrap=300)
    significant = [r["channel"] for r in rows if r["significant"]]
    if null:
        assert significant == []
    else:
        assert significant == [0] and rows[0]["score"] > 0.99 and rows[0]["ci"][0] > 0.9


class Target:
    """Whether each (variant, level) episode's agent stood on the level's target cell."""

    def __init__(self, env, targets, variants):
        self.env, self.targets, self.V = env, targets, variants
        self.hit = np.zeros((variants, len(targets)), bool)

    def __call__(self, rows, jobs, ended, actions):
        for r, job in zip(rows[~ended], jobs[~ended], strict=True):
            level, v = divmod(int(job), self.V)
            if (self.env.agent[r] == self.targets[level]).all():
                self.hit[v, level] = True


def walk(start, end):
    """The cells of the planted policy's path (columns first, then rows): a target the path reaches only
    through the goal would end the episode first."""
    (r, c), cells = start, []
    while c != end[1]:
        c += 1 if end[1] > c else -1
        cells.append((r, c))
    while r != end[0]:
        r += 1 if end[0] > r else -1
        cells.append((r, c))
    return cells


def retarget(agent, levels=LEVELS):
    env = Grid(16)
    rng = np.random.default_rng(0)
    targets = []
    for lv in levels:
        start, goal, _ = env.level_state(int(lv))
        free = [
            cell
            for cell in (divmod(c, SIZE) for c in range(SIZE * SIZE))
            if tuple(goal) not in walk(tuple(start), cell) and cell != tuple(start)
        ]
        targets.append(free[rng.integers(len(free))])
    targets = np.array(targets)
    sites = (targets[:, 0] * SIZE + targets[:, 1]).astype(float)
    plan = variants_plan(HOOK, hook_shapes(agent)[HOOK], [WriteSites((0,), (2.0,)), WriteSites((1,), (2.0,))])
    watch = Target(env, targets, 3)
    out = play(
        Intervened(agent),
        plan,
        env,
        levels,
        np.array([-1, 0, 1]),
        np.repeat(sites[None], 3, 0),
        make_runtime("cpu", "fp32"),
        watch=watch,
    )
    return watch.hit.mean(1), out


def test_writing_the_target_into_the_goal_channel_moves_the_agent_there():
    reached, out = retarget(GoalSeeker())
    plain, goal_channel, other_channel = reached
    assert goal_channel == 1.0  # every level: the agent walks to the written cell
    assert plain < 0.2 and other_channel < 0.2  # the plain agent and the control edit go to the goal
    assert out.complete[0].mean() == 1.0 and out.complete[1].mean() < 0.2


def test_the_null_agent_is_not_moved():
    reached, out = retarget(GoalSeeker(null=True))
    plain, goal_channel, other_channel = reached
    np.testing.assert_array_equal(out.ret[0], out.ret[1])  # the same random walk: the edit reads nothing
    assert plain == goal_channel == other_channel


def test_a_contrastive_vector_subtracts_the_goal():
    """With minus without the goal: channel 0 on the goal cells only (1 / levels each). Unedited
    the agent completes every level; at -levels the goal no longer stands out in the
    channel and the agent stops reaching it."""
    agent = GoalSeeker()
    levels = LEVELS[:8]
    env = Grid(8)
    for slot, lv in enumerate(levels):
        env.load(slot, env.level_state(int(lv)))
    with_goal = env.observe()
    without_goal = with_goal.copy()
    without_goal[:, 1] = 0
    vector = contrast_vector(agent, HOOK, with_goal, without_goal)
    assert vector[1].abs().max() == 0 and vector[0].sum().item() == pytest.approx(1.0)
    plan = variants_plan(
        HOOK, hook_shapes(agent)[HOOK], [AddLevelVector(vector.expand(8, *vector.shape), -8.0)]
    )
    values = np.repeat(np.arange(8, dtype=np.float64)[None], 2, 0)
    out = play(Intervened(agent), plan, env, levels, np.array([-1, 0]), values, make_runtime("cpu", "fp32"))
    assert out.complete[0].mean() == 1.0 and out.complete[1].mean() < 0.5
