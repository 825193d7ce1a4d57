"""The analysis folder: inputs recorded once, mismatches refused before anything is written."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from proclab.errors import ProclabError
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.workspace.folder import ANALYSIS_FILE, Workspace


def test_the_analysed_activation_is_asked_of_the_folder(tmp_path):
    ws = Workspace.open(tmp_path / "a")
    with pytest.raises(ProclabError, match="records no activation; run `proclab analyze hidden` on it"):
        ws.activation()
    ws.require_inputs(activation="state_out/core.0.h")
    assert ws.activation() == "state_out/core.0.h"


def test_inputs_are_recorded_once_and_checked(tmp_path):
    ws = Workspace.open(tmp_path / "a")
    ws.require_inputs(data=tmp_path / "store", activation="state_out/core.0.h", samples=None)
    ws.record_command("hidden", {"clusters": 4, "out": tmp_path / "a"}, ["hidden/summary.json"], 1.5)
    record = json.loads((tmp_path / "a" / ANALYSIS_FILE).read_text())
    assert record["inputs"] == {
        "data": str((tmp_path / "store").resolve()),
        "activation": "state_out/core.0.h",
    }
    assert record["commands"]["hidden"]["args"]["clusters"] == 4
    assert record["commands"]["hidden"]["outputs"] == ["hidden/summary.json"]

    again = Workspace.open(tmp_path / "a", create=False)
    assert again.inputs["data"] == str((tmp_path / "store").resolve())
    again.require_inputs(
        data=tmp_path / "store", samples=tmp_path / "samples"
    )  # same data, new samples: fine
    with pytest.raises(
        ProclabError, match=re.escape("made with activation 'state_out/core.0.h', not 'hook:torso.hook_fc'")
    ):
        again.require_inputs(activation="hook:torso.hook_fc")
    with pytest.raises(ProclabError, match="made with data"):
        again.require_inputs(data=tmp_path / "other")
    before = (tmp_path / "a" / ANALYSIS_FILE).read_text()
    assert (tmp_path / "a" / ANALYSIS_FILE).read_text() == before  # a refused input writes nothing


def test_missing_folder_and_basis(tmp_path):
    with pytest.raises(ProclabError, match="not an analysis folder"):
        Workspace.open(tmp_path / "none", create=False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ProclabError, match="is a file"):
        Workspace.open(tmp_path / "file")
    ws = Workspace.open(tmp_path / "a")
    with pytest.raises(ProclabError, match="run `proclab analyze hidden` first"):
        ws.basis()
    x = np.random.default_rng(0).laplace(size=(300, 5))
    ws.command_dir("hidden")
    Basis.fit(x, BasisConfig(n_ics=2), {"data": "x"}).save(ws.basis_path)
    assert ws.basis().provenance == {"data": "x"}
