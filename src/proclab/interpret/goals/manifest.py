"""The goal benchmark's pre-registration: a manifest committed before a run, checked by its sha256.

A benchmark whose rules, settings, agents or levels could change after its results were seen measures what
its author chose. So a run is described first, in a JSON manifest: the version of the decision rules, the
label's settings, each tool's settings, the agents (with the agents that have no goal, the controls) and the
*fresh* level ranges (never used to choose anything) the label and the tools play. The manifest's sha256 is
published with it (committed before the run); :func:`read_manifest` refuses a manifest whose bytes no longer
have that hash, and :func:`~proclab.interpret.goals.calls.score_goal_calls` given a manifest scores only the
agents it names and stamps every score with the hash, so a reader can check the table against the commit.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from proclab.errors import ProclabError

FIELDS = ("rules", "label", "tools", "agents", "controls", "levels")
"""The manifest's keys: ``rules`` (the decision rules' version, e.g. ``"docs/misgeneralization.md v1"``),
``label`` (the label's settings), ``tools`` (tool name -> its settings), ``agents`` (name -> what
``proclab.load`` takes), ``controls`` (names among ``agents`` that have no goal: random initialisations),
``levels`` (purpose, e.g. ``"label"`` or ``"tools"`` -> a level range ``START:NUM``)."""


@dataclass(frozen=True)
class Manifest:
    """A pre-registered run as :func:`read_manifest` read it (:data:`FIELDS`), with its file's sha256."""

    path: str
    sha256: str
    rules: str
    label: dict
    tools: dict
    agents: dict
    controls: tuple[str, ...]
    levels: dict


def sha256_of(path: str | Path) -> str:
    """The hex sha256 of the file's bytes: what is published before the run."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_manifest(path: str | Path, sha256: str) -> Manifest:
    """The manifest at ``path``, refused in one line unless its bytes have the published ``sha256`` (a changed
    manifest is a different run) or it lacks a field of :data:`FIELDS`."""
    path = Path(path)
    if not path.is_file():
        raise ProclabError(f"no manifest at {str(path)!r}")
    found = sha256_of(path)
    if found != sha256.lower():
        raise ProclabError(
            f"manifest {str(path)!r} has sha256 {found}, not the published {sha256}: a changed manifest is refused"
        )
    try:
        data = json.loads(path.read_text())
    except ValueError as err:
        raise ProclabError(f"manifest {str(path)!r} is not JSON: {err}") from None
    missing = [k for k in FIELDS if k not in data] if isinstance(data, dict) else list(FIELDS)
    if missing:
        raise ProclabError(f"manifest {str(path)!r} lacks {', '.join(missing)}")
    unknown = sorted(set(data["controls"]) - set(data["agents"]))
    if unknown:
        raise ProclabError(f"manifest {str(path)!r}: controls {', '.join(unknown)} are not among its agents")
    return Manifest(
        str(path), found, str(data["rules"]), dict(data["label"]), dict(data["tools"]), dict(data["agents"]),
        tuple(data["controls"]), dict(data["levels"]),
    )  # fmt: skip
