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
