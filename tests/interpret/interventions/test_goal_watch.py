"""Both goals per episode of batched paired play, against the definition applied by hand to every state of
the same episodes replayed one at a time."""

from dataclasses import replace

import numpy as np
import pytest
import torch

import proclab
from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs.state import episode_goals, parse_state
from proclab.errors import ProclabError
from proclab.interpret.interventions.batched_play import ProcgenLevels, play
from proclab.interpret.interventions.goal_watch import GoalWatch
from proclab.run.runtime import make_runtime
from support import TINY_GRU


def runner(game: str, rule: str):
    """A tiny agent whose policy ignores what it sees and, in sampled play, runs right or jumps right at
    random (so it passes a moved coin on some levels and touches it on others)."""
    torch.manual_seed(0)
    agent = proclab.build_agent(TINY_GRU).eval()
    with torch.no_grad():
        agent.heads.policy.weight.zero_()
        agent.heads.policy.bias.fill_(-30.0)
        agent.heads.policy.bias[[7, 8]] = 0.0  # right, up-right
    agent.env_config = EnvConfig(game=(game,), mode="easy", split="train", level_rule=rule)
    return agent


class Actions:
    """Each episode's actions (``job -> actions``), as the batched player took them."""

    def __init__(self):
        self.running, self.done = {}, {}

    def __call__(self, rows, jobs, ended, actions):
        for r, job, end, a in zip(
            rows.tolist(), jobs.tolist(), ended.tolist(), actions.tolist(), strict=True
        ):
            self.running.setdefault(r, []).append(a)
            if end:
                self.done[job] = self.running.pop(r)


def by_hand(config: EnvConfig, first: bytes, actions: list[int]) -> dict:
    """The episode replayed in a one-slot env, every state parsed, goals by their definition."""
    env = ProcgenVecEnv(replace(config, num_envs=1), seed=0)
    env.reset()
    env.set_slot_state(0, first)
    seen, completed = [], False
    for i, a in enumerate(actions):
        _, _, term, trunc, info = env.step(np.array([a]))
        if term[0] or trunc[0]:
            assert i == len(actions) - 1
            completed = bool(info["episode"]["level_complete"][0])
        else:
            seen.append(parse_state(env.slot_states()[0]))
    env.close()
    return episode_goals(parse_state(first), seen, completed)


@pytest.mark.parametrize("rule", [pytest.param("", marks=pytest.mark.slow), "coin-moved:place=floor"])
def test_goal_watch_matches_the_definition_on_the_replayed_episodes(rule):
    agent = runner("coinrun", rule)
    levels = np.arange(4)
    env = ProcgenLevels(agent.env_config, 4, seed=0)
    goals, actions = GoalWatch.of(env).start(2, levels), Actions()
    values = np.zeros((2, len(levels)))
    try:
        out = play(
            agent, None, env, levels, np.array([-1, -1]), values, make_runtime("cpu", "fp32"),
            greedy=False, watch=lambda *a: (goals(*a), actions(*a)),
        )  # fmt: skip
        firsts = [env.level_state(int(lv)) for lv in levels]
    finally:
        env.close()
    reached = goals.outcomes(out.complete)
    expected = np.zeros_like(reached)
    for lv in range(len(levels)):
        for v in range(2):
            hand = by_hand(agent.env_config, firsts[lv], actions.done[lv * 2 + v])
            expected[:, v, lv] = [hand["coin"], hand["end"]]
    np.testing.assert_array_equal(reached, expected)
    # not vacuous: unedited, the coin taken at the end counts for both; moved, the goals part on some level
    assert expected[1].any() and ((expected[0] != expected[1]).any() if rule else expected[0].any())


def test_goal_watch_refuses_a_game_without_two_goals():
    with pytest.raises(ProclabError, match="no pair of goals"):
        GoalWatch(list, lambda lv: b"", "bigfish")
