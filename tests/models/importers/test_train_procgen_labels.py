"""proclab's hook names and procgen-tools' activation labels of a train-procgen-pytorch agent, both ways."""

import pytest

from proclab.errors import ProclabError
from proclab.models import build_agent
from proclab.models.config import agent_preset
from proclab.models.importers.train_procgen import hook_of_label, procgen_tools_label


def test_every_torso_and_head_hook_has_its_label_and_back():
    names = build_agent(agent_preset("procgen")).hook_names()
    labelled = {h: procgen_tools_label(h) for h in names}
    # written out from procgen-tools' labels (blocks and residual blocks counted from 1)
    assert labelled["torso.block0.hook_conv"] == "embedder.block1.conv_out"
    assert labelled["torso.block1.hook_pool"] == "embedder.block2.maxpool_out"
    assert labelled["torso.block1.res0.hook_out"] == "embedder.block2.res1.resadd_out"  # the cheese vector's
    assert labelled["torso.block2.res1.hook_hidden"] == "embedder.block3.res2.relu2_out"
    assert labelled["torso.block2.hook_out"] == "embedder.block3.res2.resadd_out"  # its last residual block's
    assert (labelled["torso.hook_relu"], labelled["torso.hook_fc"]) == (
        "embedder.relu3_out",
        "embedder.relufc_out",
    )
    assert (labelled["heads.hook_logits"], labelled["heads.hook_value"]) == ("fc_policy_out", "fc_value_out")
    assert labelled["hook_features"] is None
    for hook, label in labelled.items():
        if label is not None:
            back = hook_of_label(label)
            assert back == hook or (hook.endswith(".hook_out") and back.endswith(".res1.hook_out"))
    with pytest.raises(ProclabError, match="no proclab hook point"):
        hook_of_label("embedder.flatten_out")
