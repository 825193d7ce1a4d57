"""``record --edit`` and ``eval --edit``: the agent is played with the edit on every forward pass."""

import json

import numpy as np
import pytest

from proclab.cli import main
from proclab.store import EpisodeStore
from support import make_agent_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_agent_checkpoint(tmp_path_factory.mktemp("edit") / "run")


def test_record_with_an_edit_stores_the_edited_outputs(checkpoint, tmp_path):
    out = tmp_path / "data"
    main(["record", "--agent", str(checkpoint), "--episodes", "2", "--num-envs", "2", "--out", str(out),
          "--precision", "fp32", "--torch-threads", "1", "--edit", "heads.hook_logits all set 0.5"])  # fmt: skip
    store = EpisodeStore(out)
    logits = store.read_steps("logits_clean")
    assert logits.size and np.all(logits == 0.5)  # what the heads' output became, not the plain agent's
    (entry,) = store.recordings().values()
    assert entry["recording"]["args"]["edit"] == ["heads.hook_logits all set 0.5"]  # saved with the recording


def test_eval_with_an_edit_and_bad_edits_in_one_line(checkpoint, tmp_path, capsys):
    out = tmp_path / "eval.json"
    main(["eval", "--agent", str(checkpoint), "--split", "test1", "--episodes", "2", "--envs-per-game", "2",
          "--torch-threads", "1", "--edit", "torso.hook_fc all scale 0", "--out", str(out)])  # fmt: skip
    assert json.loads(out.read_text())
    for bad, says in (("torso.nope all set 0", "hook point"), ("torso.hook_fc all mean", "analyze edit")):
        with pytest.raises(SystemExit) as stop:
            main(["eval", "--agent", str(checkpoint), "--episodes", "1", "--edit", bad])
        assert stop.value.code == 2 and says in capsys.readouterr().err
