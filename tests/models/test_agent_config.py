"""AgentConfig validation, presets, and building every core from its config."""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest

from proclab.errors import ProclabError
from proclab.models import AGENT_PRESETS, CORES, AgentConfig, agent_preset, build_agent


def test_registry_has_every_core():
    assert set(CORES) == {"none", "gru", "lstm", "delta", "srwm", "fake_sr", "sr_delta", "no_carry_sr"}


def test_every_field_is_documented():
    lines = inspect.getsource(AgentConfig).splitlines()
    for field in dataclasses.fields(AgentConfig):
        line = next(i for i, s in enumerate(lines) if s.strip().startswith(f"{field.name}:"))
        assert lines[line + 1].strip().startswith('"""'), field.name


@pytest.mark.parametrize("name", sorted(AGENT_PRESETS))
def test_presets(name):
    config = agent_preset(name)
    assert isinstance(config, AgentConfig)
    if name.startswith("srwm-"):
        assert config.prev_reward and config.fc == 256 and config.head_init == "torch"
        assert config.detach_every_step == name.endswith("-published")


def test_seed_presets():
    assert AGENT_PRESETS["interp-gru"].core == "gru" and AGENT_PRESETS["interp-gru"].rnn_size == 64
    assert AGENT_PRESETS["interp-gru"].fc == 64 and AGENT_PRESETS["interp-gru"].torso_init == "xavier"
    assert AGENT_PRESETS["procgen"].core == "none" and not AGENT_PRESETS["procgen"].prev_reward


def test_every_modern_srwm_core_has_a_preset():
    for core in ("none", "lstm", "delta", "srwm", "fake_sr", "sr_delta", "no_carry_sr"):
        assert AGENT_PRESETS[f"srwm-{core}"].core == core


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"core": "srmw"}, "unknown agent core 'srmw'. Did you mean 'srwm'"),
        ({"core": "srwm", "num_heads": 4}, "num_heads \\* head_dim must equal hidden"),
        ({"torso_init": "kaiming"}, "unknown torso init"),
        ({"head_init": "zeros"}, "unknown head init"),
        ({"fc": 0}, "fc=0"),
        ({"widths": ()}, "widths"),
    ],
)
def test_invalid_configs_are_user_errors(kwargs, match):
    with pytest.raises(ProclabError, match=match):
        AgentConfig(**kwargs)


def test_transformer_dims_are_only_checked_for_transformer_cores():
    AgentConfig(core="gru", num_heads=4)  # irrelevant to a GRU, so not an error


def test_unknown_preset():
    with pytest.raises(ProclabError, match="unknown agent preset 'srwm'"):
        agent_preset("srwm")


@pytest.mark.parametrize("core", sorted(CORES))
def test_every_core_builds_from_config(core, tiny_config):
    agent = build_agent(tiny_config(core))
    assert agent.config.core == core
    assert agent.heads.policy.in_features == agent.core.out_dim
    state = agent.initial_state(3)
    assert all(v.shape[0] == 3 and not v.any() for v in state.values())
    assert all(k.startswith("core.") for k in state)


def test_config_round_trips_through_json():
    config = AGENT_PRESETS["srwm-sr_delta"]
    again = AgentConfig(**json.loads(json.dumps(dataclasses.asdict(config))))
    assert again == config and isinstance(again.widths, tuple)
