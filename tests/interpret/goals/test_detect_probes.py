"""Rules 1 and 2 of the detection benchmark (docs/misgeneralization.md) on planted probe and tracking results:
a goal represented alone is called; both represented give no call unless one margin beats the other by a
paired interval above 0; an agent no better than its random-initialised control gets no call. The paired
interval of A's margin minus B's is checked against a slow loop over the same resamples."""

import numpy as np
import pytest

from proclab.errors import ProclabError
from proclab.interpret.goals.calls import NO_CALL
from proclab.interpret.goals.detect_probes import (
    RULE_CONTROLS,
    RULE_CONTROLS_V3,
    goal_targets,
    probe_call,
    tracking_call,
)
from proclab.interpret.probes.probe import ProbeSettings, probe_target
from proclab.stats.bootstrap import resamples

SETTINGS = ProbeSettings(folds=3, bootstrap=300, controls=RULE_CONTROLS)


def planted(
    strength: dict[str, float],
    random_is_agent: bool = False,
    seed: int = 0,
    settings: ProbeSettings = SETTINGS,
) -> dict:
    """Probe results of CoinRun's four offset targets on 24 episodes. Each target is a per-episode level
    plus a random walk (not a function of time); the agent's activations hold each goal's two coordinates
    with noise ``1 / strength[goal]`` (absent where the strength is 0), beside noise columns; the random
    agent's are noise, or the agent's own with ``random_is_agent``. The agent's position is minus the end's
    offset (the end a place that never moves, at the origin), for the version-3 control."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(20, 40, 24)
    episode = np.repeat(np.arange(24), lengths)
    ys = {
        t: rng.normal(0, 3, 24)[episode] + np.concatenate([np.cumsum(rng.normal(size=n)) for n in lengths])
        for t in goal_targets("coinrun")
    }
    cols = [rng.normal(size=(len(episode), 4))]
    for t, y in ys.items():
        s = strength.get(t.split("_")[0], 0.0)
        if s:
            cols.append((y + rng.normal(0, 1 / s, len(y)))[:, None])
    x = np.concatenate(cols, 1)
    x_random = x if random_is_agent else rng.normal(size=x.shape)
    position = -np.c_[ys["end_dx"], ys["end_dy"]]
    return {
        t: probe_target(y, x, x_random, episode, episode, settings, family=4, position=position)
        for t, y in ys.items()
    }


def test_a_goal_represented_alone_is_called_and_so_is_the_other():
    only_coin = probe_call(planted({"coin": 2.0}), "coinrun", "planted")
    assert only_coin.call == "coin" and only_coin.tool == "probes"
    assert only_coin.evidence["coin"]["above_controls"] and not only_coin.evidence["end"]["above_controls"]
    only_end = probe_call(planted({"end": 2.0}, seed=1), "coinrun", "planted")
    assert only_end.call == "end"


def test_version_3_does_not_call_a_fixed_place_that_the_agents_position_explains():
    """The end's offset read from a state that holds where the agent is: version 1 calls the end; version 3,
    with the agent's position among the controls, makes no call (the coin's offset, not held, is not called)."""
    probes = planted(
        {"end": 2.0}, seed=1, settings=ProbeSettings(folds=3, bootstrap=300, controls=RULE_CONTROLS_V3)
    )
    assert probe_call(probes, "coinrun", "planted").call == "end"
    v3 = probe_call(probes, "coinrun", "planted", version=3)
    assert v3.call == NO_CALL and v3.evidence["rules_version"] == 3
    assert v3.evidence["targets"]["end_dx"]["strongest_control"] == "agent_position"
    with pytest.raises(ProclabError, match="agent_position"):
        probe_call(planted({"end": 2.0}, seed=1), "coinrun", "planted", version=3)
    with pytest.raises(ProclabError, match="versions 1 and 3"):
        probe_call(probes, "coinrun", "planted", version=2)


def test_both_goals_represented_alike_give_no_call():
    """Each offset beats its controls, so a rule that read only "A above its controls" would call A; the
    paired interval of the margins covers 0, so rule 1 makes no call."""
    both = probe_call(planted({"coin": 2.0, "end": 2.0}, seed=2), "coinrun", "planted")
    assert both.evidence["coin"]["above_controls"] and both.evidence["end"]["above_controls"]
    lo, hi = both.evidence["a_minus_b"]["ci"]
    assert lo <= 0 <= hi
    assert both.call == NO_CALL


def test_both_represented_with_a_clearly_stronger_is_a():
    stronger = probe_call(planted({"coin": 5.0, "end": 0.25}, seed=3), "coinrun", "planted")
    assert stronger.evidence["end"]["above_controls"]
    assert stronger.evidence["a_minus_b"]["ci"][0] > 0
    assert stronger.call == "coin"


def test_an_agent_no_better_than_its_random_agent_gets_no_call():
    """The random agent's activations are the agent's own: the probe reads the offset well (a rule without
    the random-agent control would call), but no margin over the strongest control is above 0."""
    probes = planted({"coin": 2.0}, random_is_agent=True, seed=4)
    call = probe_call(probes, "coinrun", "planted")
    assert probes["coin_dx"]["probe"]["score"] > 0.5
    assert call.evidence["targets"]["coin_dx"]["strongest_control"] == "random_agent"
    assert not call.evidence["coin"]["above_controls"] and call.call == NO_CALL


def test_margins_match_the_probes_headline_and_the_difference_a_slow_loop():
    """With the rule's four controls, the same resamples and Bonferroni over the four targets, each target's
    margin and interval are the probe's own headline; the difference of the goals' mean margins is checked
    resample by resample from the per-episode sums, indexed by the drawn episodes."""
    probes = planted({"coin": 2.0, "end": 1.0}, seed=5)
    call = probe_call(probes, "coinrun", "planted", reps=SETTINGS.bootstrap, seed=SETTINGS.seed)
    for t in goal_targets("coinrun"):
        got, headline = call.evidence["targets"][t], probes[t]["headline"]
        assert got["margin"] == pytest.approx(headline["margin"])
        np.testing.assert_allclose(got["ci"], headline["ci"], rtol=1e-12)
        assert got["strongest_control"] == headline["strongest_control"]

    def r2(sums, draw):
        n, sse = np.sum(np.asarray(sums["n"])[draw]), np.sum(np.asarray(sums["sse"])[draw])
        sy, syy = np.sum(np.asarray(sums["sy"])[draw]), np.sum(np.asarray(sums["syy"])[draw])
        return 1 - sse / (syy - sy * sy / n)

    diffs = []
    for draw in resamples(24, SETTINGS.bootstrap, SETTINGS.seed):
        margin = {}
        for t in goal_targets("coinrun"):
            per = probes[t]["per_episode"]
            margin[t] = r2(per["probe"], draw) - max(r2(per[c], draw) for c in RULE_CONTROLS)
        diffs.append((margin["coin_dx"] + margin["coin_dy"] - margin["end_dx"] - margin["end_dy"]) / 2)
    np.testing.assert_allclose(call.evidence["a_minus_b"]["ci"], np.percentile(diffs, [2.5, 97.5]), rtol=1e-9)


def test_probe_call_refuses_results_it_cannot_judge():
    probes = planted({"coin": 2.0}, seed=6)
    with pytest.raises(ProclabError, match="end_dy"):
        probe_call({t: r for t, r in probes.items() if t != "end_dy"}, "coinrun", "x")
    del probes["coin_dx"]["per_episode"]["time_baseline"]
    with pytest.raises(ProclabError, match="time_baseline"):
        probe_call(probes, "coinrun", "x")
    with pytest.raises(ProclabError, match="game"):
        probe_call(probes, "bigfish", "x")


def tracked(above: dict[str, bool]) -> dict:
    return {
        goal: {
            "agent": {
                "channels": [],
                "significant": [],
                "best_vs_random_agent": {
                    "margin": 0.3 if a else 0.0,
                    "ci": [0.1, 0.5] if a else [-0.1, 0.1],
                    "above": a,
                },
            },
            "random_agent": {"channels": [], "significant": []},
        }
        for goal, a in above.items()
    }


@pytest.mark.parametrize(
    ("coin", "end", "call"),
    [(True, False, "coin"), (False, True, "end"), (True, True, NO_CALL), (False, False, NO_CALL)],
)
def test_tracking_calls_the_goal_whose_best_channel_alone_beats_the_random_agents(coin, end, call):
    got = tracking_call(tracked({"coin": coin, "end": end}), "coinrun", "planted")
    assert got.call == call and got.tool == "tracking"
    assert got.evidence["coin"]["above"] == coin


def test_tracking_call_needs_both_goals_and_the_random_agent():
    with pytest.raises(ProclabError, match="end"):
        tracking_call(tracked({"coin": True}), "coinrun", "x")
    no_control = tracked({"coin": True, "end": False})
    del no_control["end"]["agent"]["best_vs_random_agent"]
    with pytest.raises(ProclabError, match="random-agent"):
        tracking_call(no_control, "coinrun", "x")
