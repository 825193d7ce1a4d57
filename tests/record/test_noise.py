"""Action noise: the seed's transform, the small op language, and its errors."""

import pytest
import torch

from proclab.errors import ProclabError
from proclab.record import ActionNoise


def test_seed_preset_is_interpreting_rl_behaviors_transform():
    noise = ActionNoise.parse("seed")
    assert noise.spec() == "scale=0.7,clamp=-1.8:0.8,set=9-14:-3,set=7:0.1"
    logits = torch.tensor([[-4.0, -1.0, 0.0, 0.5, 2.0, 1.0, 0.0, 5.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]])
    expected = [-1.8, -0.7, 0.0, 0.35, 0.8, 0.7, 0.0, 0.1, 0.0, -3, -3, -3, -3, -3, -3]
    torch.testing.assert_close(noise(logits)[0], torch.tensor(expected))
    assert logits[0, 7] == 5.0  # the input is left alone


def test_ops_apply_in_order():
    logits = torch.zeros(2, 15)
    out = ActionNoise.parse("bias=0-1:2, temp=4, clamp=0:0.25")(logits)
    assert out[:, :2].tolist() == [[0.25, 0.25]] * 2 and (out[:, 2:] == 0).all()
    assert not ActionNoise.parse("none") and ActionNoise.parse("none").spec() == "none"
    assert ActionNoise.parse(" scale=1e-1 ").spec() == "scale=0.1"


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("jitter=3", "unknown operation 'jitter'"),
        ("temp=0", "needs a number > 0"),
        ("clamp=1:0", "LO <= HI"),
        ("set=9-15:-3", "not within 0-14"),
        ("bias=7", "needs ACTIONS:VALUE"),
        ("scale=x", "needs a number"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec, why):
    with pytest.raises(ProclabError, match="valid: scale=S") as err:
        ActionNoise.parse(spec)
    assert why in str(err.value) and "\n" not in str(err.value)
