"""The benchmark's pre-registration: a manifest read only with its published sha256, and scores under it."""

import hashlib
import json

import pytest

from proclab.errors import ProclabError
from proclab.interpret.goals.calls import NO_CALL, GoalCall, score_goal_calls
from proclab.interpret.goals.manifest import read_manifest, sha256_of

RUN = {
    "rules": "docs/misgeneralization.md v1",
    "label": {"episodes": 200, "split": "1999990000:10000"},
    "tools": {"steering": {"levels": 50, "controls": 20}},
    "agents": {"a1": "runs/a1", "b1": "runs/b1", "r1": "runs/r1"},
    "controls": ["r1"],
    "levels": {"label": "1999990000:10000", "tools": "1999980000:10000"},
}


def manifest_file(tmp_path, content=RUN):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(content, indent=1))
    return path


def test_a_manifest_is_read_with_its_published_hash_and_refused_once_changed(tmp_path):
    path = manifest_file(tmp_path)
    published = hashlib.sha256(path.read_bytes()).hexdigest()  # what the commit before the run carries
    assert sha256_of(path) == published
    manifest = read_manifest(path, published.upper())
    assert manifest.sha256 == published and manifest.controls == ("r1",) and manifest.agents == RUN["agents"]
    path.write_text(path.read_text().replace("50", "60"))  # a tool's setting changed after the fact
    with pytest.raises(ProclabError, match="a changed manifest is refused"):
        read_manifest(path, published)


def test_an_incomplete_manifest_is_one_line(tmp_path):
    for content, message in (
        ({k: v for k, v in RUN.items() if k != "levels"}, "lacks levels"),
        ({**RUN, "controls": ["r2"]}, "controls r2 are not among its agents"),
    ):
        path = manifest_file(tmp_path, content)
        with pytest.raises(ProclabError, match=message):
            read_manifest(path, sha256_of(path))


def test_scores_under_a_manifest_carry_its_hash_read_its_controls_and_refuse_other_agents(tmp_path):
    path = manifest_file(tmp_path)
    manifest = read_manifest(path, sha256_of(path))
    calls = [
        GoalCall("probe", "a1", "coin"),
        GoalCall("probe", "b1", "end"),
        GoalCall("probe", "r1", NO_CALL),
    ]
    labels = {"a1": "coin", "b1": "end"}
    (score,) = score_goal_calls(calls, labels, manifest=manifest)
    assert score.manifest_sha256 == manifest.sha256 and score.hits["count"] == 2
    (plain,) = score_goal_calls(calls, labels)
    assert plain.manifest_sha256 == ""
    # the manifest names r1 a control: a goal call on it voids the tool's hits, as a control given by hand would
    (voided,) = score_goal_calls([*calls[:2], GoalCall("probe", "r1", "coin")], labels, manifest=manifest)
    assert voided.false_hits_on_controls == 1 and voided.hits["count"] == 0
    with pytest.raises(ProclabError, match="not among the agents of manifest"):
        score_goal_calls(
            [*calls, GoalCall("probe", "c9", "coin")], {**labels, "c9": "coin"}, manifest=manifest
        )
