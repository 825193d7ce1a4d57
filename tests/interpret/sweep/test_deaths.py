"""Deaths by cause: the nearest hazard against a slow loop over every entity and cell of real CoinRun states,
and in batched play of real CoinRun levels, every death classified from its episode's last observed state
(found by a watcher that keeps every state), paired rates whose intervals are the sweep's bootstrap."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from level_fixtures import moved_next_to_kinds
from proclab.envs import EnvConfig
from proclab.envs.state import glossary, parse_state
from proclab.envs.state.model import PLAYER
from proclab.envs.state.sample import random_states
from proclab.errors import ProclabError
from proclab.interpret.interventions.batched_play import ProcgenLevels, play
from proclab.interpret.sweep.deaths import ANY, UNCLEAR, Deaths, Hazards
from proclab.interpret.sweep.stats import compare
from proclab.run.runtime import make_runtime
from proclab.stats.bootstrap import interval, resamples

RT = make_runtime("cpu", "fp32", 1)


def slow_cause(data: bytes, radius: float) -> str:
    """The hazard cause nearest to the agent, by a loop over every entity and every grid cell."""
    state = parse_state(data)
    names, me = glossary("coinrun"), state.agent
    best, cause = np.inf, UNCLEAR
    for name, kinds in names.hazards.items():
        values = {names.type_of(k) for k in kinds}
        for e in state.entities:
            if e.type in values and e.type != PLAYER and not e.use_abs_coords:
                gap = max(abs(e.x - me.x) - me.rx - e.rx, abs(e.y - me.y) - me.ry - e.ry)
                best, cause = (gap, name) if gap < best else (best, cause)
        h, w = state.grid.shape
        for row in range(h):
            for col in range(w):
                if state.grid[row, col] in values:
                    gap = max(abs(me.x - col - 0.5) - me.rx - 0.5, abs(me.y - row - 0.5) - me.ry - 0.5)
                    best, cause = (gap, name) if gap < best else (best, cause)
    return cause if best <= radius else UNCLEAR


def test_the_cause_is_the_slowly_found_nearest_hazard_on_real_coinrun_states():
    hazards = [k for kinds in glossary("coinrun").hazards.values() for k in kinds]
    states = list(random_states("coinrun", "hard", 30, seed=3, num_envs=2, keep_prob=0.2))
    states += moved_next_to_kinds(states, np.random.default_rng(2), hazards)
    seen = set()
    for radius in (0.5, 2.0):
        found = Hazards("coinrun", radius)
        for s in states:
            got = found.causes[found.classify(s)]
            assert got == slow_cause(s, radius)
            seen.add(got)
    assert len(seen) >= 3  # the states show several causes, and unclear
    assert found.causes[found.classify(None)] == UNCLEAR


def test_a_game_without_named_hazards_is_one_line():
    with pytest.raises(ProclabError, match="no hazards are named for maze"):
        Hazards("maze")


class Runner:
    """Prefers running right and jumping right (sampled, so levels differ): it meets hazards often."""

    config = SimpleNamespace(num_actions=15)

    def initial_state(self, batch, device=None):
        return {}

    def step(self, obs, state, first, prev_reward=None):
        logits = torch.zeros(len(obs), 15)
        logits[:, 7], logits[:, 8] = 2.0, 2.5
        return SimpleNamespace(logits=logits), state


class Everything:
    """Keeps every state each episode was observed in after a step (read from every slot at every step)."""

    def __init__(self, states):
        self.states, self.seen = states, {}

    def __call__(self, rows, jobs, ended, actions):
        states = self.states()
        for r, job, end in zip(rows, jobs, ended, strict=True):
            if not end:
                self.seen.setdefault(int(job), []).append(states[r])


def test_deaths_in_played_coinrun_are_classified_by_replay_as_from_the_states_seen_in_play():
    """The replay-based cause against a watcher that reads every slot's state at every step: the state
    before the fatal step is the last one it saw (the level's first frame for a death on the first step)."""
    L = 24
    levels = np.arange(100, 100 + L)
    env = ProcgenLevels(EnvConfig(game=("coinrun",), mode="hard", num_envs=1), 8, seed=0)
    deaths = Deaths(env.replay, "coinrun").start(2, levels)
    everything = Everything(lambda: env.env.get_state()["procgen"][0])

    def watch(rows, jobs, ended, actions):
        deaths(rows, jobs, ended, actions)
        everything(rows, jobs, ended, actions)

    try:
        plain = (np.array([-1, -1]), np.zeros((2, L)))  # two variants of the same agent: paired, identical
        out = play(Runner(), None, env, levels, *plain, RT, greedy=False, watch=watch)
        deaths.classify(out.complete, out.timed_out)
        first = {lv: env.level_state(int(level)) for lv, level in enumerate(levels)}
    finally:
        env.close()
    rates = deaths.rates(out.complete, out.timed_out)
    died = rates[ANY].astype(bool)
    np.testing.assert_array_equal(died, (out.complete == 0) & (out.length < 1000))  # no time-outs here
    causes = []
    for v in range(2):
        for lv in range(L):
            job = lv * 2 + v
            if not died[v, lv]:
                assert deaths.causes[deaths.cause[v, lv]] == UNCLEAR  # only deaths are classified
                continue
            before = everything.seen[job][-1] if out.length[v, lv] > 1 else first[lv]
            want = slow_cause(before, 2.0)
            assert deaths.causes[deaths.cause[v, lv]] == want
            causes.append(want)
            for c in deaths.causes:
                assert rates[c][v, lv] == float(want == c)
    assert {"saw", "enemy", "lava"} <= set(causes)  # these levels kill the runner by every hazard
    np.testing.assert_array_equal(sum(rates[c] for c in deaths.causes), rates[ANY])
    np.testing.assert_array_equal(deaths.cause[0], deaths.cause[1])


def test_a_replay_that_ends_early_stops_with_one_line():
    deaths = Deaths(lambda level, actions: None, "coinrun").start(1, np.array([5]))
    deaths(np.array([0]), np.array([0]), np.array([False]), np.array([3]))
    deaths(np.array([0]), np.array([0]), np.array([True]), np.array([4]))
    with pytest.raises(ProclabError, match="ended before its fatal step"):
        deaths.classify(np.zeros((1, 1)), np.zeros((1, 1), bool))


def test_death_rates_are_tested_as_the_sweeps_per_level_metrics():
    """A death rate's change and interval: the same resamples and percentile interval as return's."""
    rng = np.random.default_rng(0)
    V, L = 3, 40
    out = SimpleNamespace(
        ret=rng.normal(size=(V, L)),
        complete=rng.integers(0, 2, (V, L)).astype(float),
        length=rng.integers(10, 50, (V, L)).astype(float),
        actions=rng.integers(0, 5, (V, L, 4)),
    )
    saw = (rng.random((V, L)) < np.array([[0.1], [0.5], [0.2]])).astype(float)
    reports = compare(
        out,
        ["baseline", "a", "a"],
        ["w", "x", "y", "z"],
        bootstrap=500,
        permutations=200,
        correction="holm",
        alpha=0.05,
        seed=4,
        per_level={"deaths:saw": saw},
    )
    idx = resamples(L, 500, 4)
    for v in (1, 2):
        boot = np.array([(saw[v, rows] - saw[0, rows]).mean() for rows in idx])  # the resamples, by hand
        got = reports[v - 1]["deaths"]["saw"]
        assert got["change"] == pytest.approx(saw[v].mean() - saw[0].mean())
        np.testing.assert_allclose(got["ci95"], interval(boot), atol=1e-12)
        assert "deaths:saw" not in reports[v - 1]
    assert reports[0]["deaths"]["saw"]["significant"]  # 10 % -> 50 % of 40 levels
