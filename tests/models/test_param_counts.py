"""Parameter counts under the modern-srwm presets vs the spec's table (§2.2).

The published counts include a LayerNorm(hidden) that the SR, Fake-SR, no-carry-SR and
SR-Delta layers construct but never apply; proclab drops it, so those cores must have exactly
2 * hidden fewer parameters per layer, and every core must be within 1% of the table.
"""

from __future__ import annotations

import pytest

from proclab.models import AGENT_PRESETS, build_agent

PUBLISHED = {  # spec srwm_impala_procgen.md §2.2, counted on the original classes
    "none": 626_272,
    "lstm": 1_153_616,
    "delta": 1_054_800,
    "fake_sr": 958_544,
    "srwm": 967_760,
    "no_carry_sr": 967_760,
    "sr_delta": 976_208,
}
UNUSED_LAYERNORM = {"fake_sr", "srwm", "no_carry_sr", "sr_delta"}


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("core", sorted(PUBLISHED))
def test_parameter_counts_match_the_published_models(core):
    config = AGENT_PRESETS[f"srwm-{core}"]
    assert (config.fc, config.prev_reward, config.hidden, config.num_heads, config.head_dim) == (
        256,
        True,
        128,
        8,
        16,
    )
    assert (config.num_layers, config.ff, config.rnn_size) == (2, 512, 256)
    n = _count(build_agent(config))
    dropped = 2 * config.hidden * config.num_layers if core in UNUSED_LAYERNORM else 0
    assert n == PUBLISHED[core] - dropped
    assert abs(n - PUBLISHED[core]) <= 0.01 * PUBLISHED[core]


def test_published_variants_have_the_same_parameters():
    for core in ("delta", "srwm", "sr_delta"):
        a, b = (
            build_agent(AGENT_PRESETS[f"srwm-{core}"]),
            build_agent(AGENT_PRESETS[f"srwm-{core}-published"]),
        )
        assert {n: p.shape for n, p in a.named_parameters()} == {n: p.shape for n, p in b.named_parameters()}


def test_interp_gru_agent_size():
    """interpreting-rl-behavior: IMPALA 16-32-32, FC 2048->64, GRU 64->64, heads on 64."""
    agent = build_agent(AGENT_PRESETS["interp-gru"])
    convs = _count(agent.torso) - _count(agent.torso.fc)
    assert agent.torso.fc.in_features == 2048 and agent.torso.fc.out_features == 64
    gru = 3 * 64 * (64 + 64) + 2 * 3 * 64
    assert _count(agent.core) == gru
    assert _count(agent) == convs + 2048 * 64 + 64 + gru + 64 * 15 + 15 + 64 + 1
