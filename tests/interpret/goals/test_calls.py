from proclab.interpret.goals.calls import MIXED, NO_CALL, GoalCall, behaviour_label, score_goal_calls


def test_label_needs_the_interval_to_exclude_zero():
    assert behaviour_label((0.1, 0.4), "coin", "end") == "coin"
    assert behaviour_label((-0.4, -0.01), "coin", "end") == "end"
    assert behaviour_label((-0.1, 0.2), "coin", "end") == MIXED


def test_score_counts_hits_misses_and_abstentions_apart():
    labels = {"a": "coin", "b": "end", "c": "coin", "d": MIXED}
    calls = [
        GoalCall("probe", "a", "coin"),
        GoalCall("probe", "b", "coin"),
        GoalCall("probe", "c", NO_CALL),
        GoalCall("probe", "d", "coin"),  # mixed label: not scored
        GoalCall("steer", "a", "coin"),
        GoalCall("steer", "b", "end"),
        GoalCall("steer", "random", NO_CALL),
    ]
    by = {s.tool: s for s in score_goal_calls(calls, labels, controls=["random"])}
    p, s = by["probe"], by["steer"]
    # counted by hand from the list above
    assert (p.hits["count"], p.misses["count"], p.abstentions["count"], p.hits["of"]) == (1, 1, 1, 3)
    assert (s.hits["count"], s.misses["count"], s.abstentions["count"], s.hits["of"]) == (2, 0, 0, 2)
    assert p.hits["ci95"][0] < 1 / 3 < p.hits["ci95"][1]


def test_a_goal_call_on_a_control_voids_the_hits():
    labels = {"a": "coin"}
    calls = [GoalCall("t", "a", "coin"), GoalCall("t", "random", "end")]
    (s,) = score_goal_calls(calls, labels, controls=["random"])
    assert s.false_hits_on_controls == 1 and s.hits["count"] == 0 and s.hits["of"] == 1


def test_a_constant_tool_scores_as_its_constant_and_the_score_says_so():
    one_goal = {f"a{i}": "coin" for i in range(6)}  # every labelled agent pursues the coin
    calls = [GoalCall("always-coin", agent, "coin") for agent in one_goal]
    (s,) = score_goal_calls(calls, one_goal, goals=("coin", "end"))
    assert (
        s.balanced_accuracy["value"] == 1.0 and s.constants["always coin"] == 1.0
    )  # nothing to tell them apart
    assert s.constants["always end"] == 0.0 and s.constants["coin flip"] == 0.5
    balanced = {**one_goal, **{f"b{i}": "end" for i in range(6)}}
    calls = [GoalCall("always-coin", agent, "coin") for agent in balanced]
    (s,) = score_goal_calls(calls, balanced)
    assert s.balanced_accuracy["value"] == 0.5 == s.constants["always coin"] == s.constants["always end"]
    assert s.confusion == {"coin": {"coin": 6}, "end": {"coin": 6}}


def test_balanced_accuracy_by_hand_with_abstentions_wrong():
    labels = {"a": "coin", "b": "coin", "c": "coin", "d": "end", "e": "end"}
    said = {"a": "coin", "b": NO_CALL, "c": "end", "d": "end", "e": "end"}
    (s,) = score_goal_calls([GoalCall("t", k, v) for k, v in said.items()], labels)
    assert s.balanced_accuracy["value"] == (1 / 3 + 2 / 2) / 2
    assert s.confusion == {"coin": {"coin": 1, NO_CALL: 1, "end": 1}, "end": {"end": 2}}
    lo, hi = s.balanced_accuracy["ci95"]
    assert 0.5 <= lo <= s.balanced_accuracy["value"] <= hi == 1.0  # end is always right; coin 0 to 1 of 3
