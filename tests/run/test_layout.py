"""Learner layouts: the spec, the choice by timing, the cache and the override."""

import json

import pytest

from proclab.errors import ProclabError
from proclab.run.layout import (
    Layout,
    LayoutCache,
    PaceWatch,
    Timings,
    cache_path,
    choose_layout,
    layout_key,
    validate_layout,
)
from proclab.run.runtime import make_runtime

PLANTED = Timings(
    learner={(0, "intra"): 0.9e-3, (64, "intra"): 0.4e-3, (128, "intra"): 0.5e-3, (64, "workers"): 0.45e-3},
    acting={"intra": 0.2e-3, "workers": 0.1e-3},
)


def never() -> Timings:
    raise AssertionError("the layouts were timed")


def test_specs_round_trip_and_acting_defaults_to_the_learners_scheme():
    assert str(Layout.parse("64:intra,acting:workers")) == "64:intra,acting:workers"
    assert Layout.parse("128:workers") == Layout(128, "workers", "workers")
    assert Layout.parse("whole:intra") == Layout(0, "intra", "intra")
    for layout in (Layout(), Layout(256, "intra", "workers"), Layout(64, "workers", "intra")):
        assert Layout.parse(str(layout)) == layout


@pytest.mark.parametrize(
    "spec",
    ["", "64", "64:threads", "0:intra", "-64:intra", "big:intra", "64:intra,act:intra", "whole:workers"],
)
def test_bad_specs_are_one_line_errors(spec):
    with pytest.raises(ProclabError, match="invalid learner layout") as err:
        validate_layout(spec)
    assert "\n" not in str(err.value)


def test_layouts_set_the_runtime_for_the_threads_at_hand():
    rt = make_runtime("cpu", "fp32")
    two = Layout(64, "workers", "intra").apply(rt, threads=2)
    assert (two.compute_chunk, two.workers, two.acting_workers) == (64, 2, 0)
    one = Layout(128, "workers", "workers").apply(rt, threads=1)  # one thread: nothing side by side
    assert (one.compute_chunk, one.workers, one.acting_workers) == (128, 0, 0)


def test_the_chooser_picks_what_the_planted_timings_say_is_fastest(tmp_path):
    cache = LayoutCache(tmp_path / "layouts.json")
    choice = choose_layout("auto", "k", lambda: PLANTED, cache)
    assert choice.layout == Layout(64, "intra", "workers") and "measured" in choice.how
    slower_pieces = Timings({**PLANTED.learner, (64, "intra"): 2e-3, (128, "intra"): 3e-3}, {"intra": 1e-4})
    choice = choose_layout("measure", "k", lambda: slower_pieces, cache)
    assert choice.layout == Layout(64, "workers", "intra")


def test_a_cached_choice_skips_the_timing_and_measure_times_again(tmp_path):
    cache = LayoutCache(tmp_path / "layouts.json")
    first = choose_layout("auto", "k", lambda: PLANTED, cache)
    again = choose_layout("auto", "k", never, LayoutCache(tmp_path / "layouts.json"))
    assert again.layout == first.layout and again.how.startswith("cached")
    whole = Timings({(0, "intra"): 1e-4, (64, "intra"): 1e-3}, {"intra": 1e-4})
    assert choose_layout("measure", "k", lambda: whole, cache).layout == Layout()
    assert choose_layout("auto", "k", never, cache).layout == Layout()  # the new measurement replaced it
    entry = json.loads((tmp_path / "layouts.json").read_text())["layouts"]["k"]
    assert entry["layout"] == "whole:intra,acting:intra" and entry["learner_ms_per_sample"]["64:intra"] == 1.0


def test_an_explicit_layout_wins_over_cache_and_timing(tmp_path):
    cache = LayoutCache(tmp_path / "layouts.json")
    choose_layout("auto", "k", lambda: PLANTED, cache)
    choice = choose_layout("128:workers,acting:intra", "k", never, cache)
    assert choice.layout == Layout(128, "workers", "intra") and choice.how == "given"


def test_the_cache_is_keyed_by_cpu_precision_threads_agent_and_batch(tmp_path):
    base = dict(
        cpu="Xeon", precision="bf16", threads=2, torch_version="2.13", agent={"fc": 256}, minibatch=2048
    )
    key = layout_key(**base)
    assert layout_key(**base) == key
    changed = [
        {"cpu": "EPYC"},
        {"precision": "fp32"},
        {"threads": 4},
        {"torch_version": "2.14"},
        {"agent": {"fc": 128}},
        {"minibatch": 512},
    ]
    keys = {layout_key(**{**base, **change}) for change in changed}
    assert key not in keys and len(keys) == len(changed)
    cache = LayoutCache(tmp_path / "layouts.json")
    choose_layout("auto", key, lambda: PLANTED, cache)
    other = layout_key(**{**base, "precision": "fp32"})
    whole = Timings({(0, "intra"): 1e-4}, {"intra": 1e-4})
    assert choose_layout("auto", other, lambda: whole, cache).layout == Layout()  # timed: a miss
    assert choose_layout("auto", key, never, cache).layout == Layout(64, "intra", "workers")


@pytest.mark.parametrize(
    "content",
    ["{not json", "", '{"version": 1, "layouts": []}', '["a"]', '{"version": 1, "layouts": {"k": 3}}'],
)
def test_a_corrupt_cache_is_ignored_with_a_warning_and_rewritten(tmp_path, content):
    path = tmp_path / "layouts.json"
    path.write_text(content)
    with pytest.warns(UserWarning, match="layout cache"):
        choice = choose_layout("auto", "k", lambda: PLANTED, LayoutCache(path))
    assert choice.layout == Layout(64, "intra", "workers")
    assert json.loads(path.read_text())["layouts"]["k"]["layout"] == "64:intra,acting:workers"


def test_an_unwritable_cache_only_warns(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.warns(UserWarning, match="could not save the layout cache"):
        choice = choose_layout("auto", "k", lambda: PLANTED, LayoutCache(blocker / "layouts.json"))
    assert choice.layout == Layout(64, "intra", "workers")


def test_the_cache_lives_in_the_users_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_path() == tmp_path / "proclab" / "layouts.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_path().parts[-3:] == (".cache", "proclab", "layouts.json")


def _watch_answers(watch: PaceWatch, seconds: list[float]) -> list[int]:
    """The updates (0-based) at which the watch asked for a new timing."""
    return [i for i, s in enumerate(seconds) if watch.observe(s)]


def test_the_pace_settles_on_the_median_after_a_warm_up():
    watch = PaceWatch(settle=3)
    assert _watch_answers(watch, [50.0, 10.0, 12.0, 11.0]) == []
    assert watch.pace == 11.0  # the warm-up's 50 s is not the pace


def test_a_new_load_asks_for_a_timing_once_then_the_next_layout_settles_its_own_pace():
    watch = PaceWatch(factor=1.5, patience=3, settle=3, min_seconds=2.0)
    pace = [10.0] * 4
    hiccups = [16.0, 10.0, 16.0, 16.0, 10.0]  # a slow update now and then is not a new load
    loaded = [16.0, 16.0, 16.0]
    assert _watch_answers(watch, pace + hiccups + loaded) == [len(pace + hiccups) + 2]
    assert watch.pace is None  # started over
    # the same load under the new layout is that layout's pace: no further timing
    assert _watch_answers(watch, [16.0] * 10) == []
    assert watch.pace == 16.0


def test_a_load_that_leaves_speeds_the_updates_and_asks_too():
    watch = PaceWatch(factor=1.5, patience=3, settle=3)
    assert _watch_answers(watch, [30.0] * 4 + [10.0] * 3) == [6]


def test_departures_in_both_directions_do_not_add_up():
    watch = PaceWatch(factor=1.5, patience=3, settle=3)
    assert _watch_answers(watch, [10.0] * 4 + [16.0, 16.0, 5.0, 5.0, 16.0, 16.0]) == []
    assert abs(watch.streak) == 2


def test_short_updates_never_ask_for_a_timing():
    watch = PaceWatch(factor=1.5, patience=3, settle=3, min_seconds=2.0)
    assert _watch_answers(watch, [0.1] * 4 + [1.0] * 20) == []  # 10x slower, still short
    assert _watch_answers(watch, [3.0]) == [0]  # the streak went on; an update of >= 2 s counts


@pytest.mark.parametrize("kwargs", [{"factor": 1.0}, {"patience": 0}, {"settle": 0}])
def test_a_pace_watch_needs_sensible_thresholds(kwargs):
    with pytest.raises(ValueError, match="PaceWatch"):
        PaceWatch(**kwargs)
