"""What an agent is made of: :class:`AgentConfig` and the named presets of the seeds.

One frozen dataclass describes every agent (torso, core, heads, initialisation, gradient
semantics), so that a run's ``config.json`` rebuilds the exact network and tyro can expose
every field as a command-line flag. The presets reproduce the three seeds' agents.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from proclab.envs.actions import NUM_ACTIONS
from proclab.errors import ProclabError, unknown_choice
from proclab.models.cores import CORES
from proclab.models.torso import NATURE_LAYERS, POOLS, TORSOS

TORSO_INITS = ("torch", "xavier")
TRANSFORMER_CORES = ("delta", "srwm", "fake_sr", "sr_delta", "no_carry_sr")  # use hidden / heads / ff
STATELESS_CORES = ("none", "fake_sr", "no_carry_sr")  # no carried state: PPO shuffles single samples
HEAD_INITS = ("orthogonal", "torch")


@dataclass(frozen=True)
class AgentConfig:
    """An IMPALA-ResNet agent with a selectable memory core and policy/value heads."""

    core: str = "none"
    """Memory core: none, gru, lstm, delta, srwm, fake_sr, sr_delta, no_carry_sr (see docs/agents.md)."""
    torso: str = "impala"
    """Image torso: impala (the IMPALA ResNet of all three seeds) or nature (the Nature CNN, which
    some imported agents have; its widths are its three convolutions' channels)."""
    widths: tuple[int, ...] = (16, 32, 32)
    """Channels of the IMPALA conv blocks (each block halves the image size)."""
    pool: str = "torch"
    """Padding of the IMPALA blocks' max-pool: torch (one pixel on every side) or same (XLA's SAME,
    after the image only; Flax agents such as Cleanba's)."""
    fc: int = 256
    """Width of the fully connected layer after the conv blocks (interpreting-rl-behavior: 64)."""
    prev_reward: bool = False
    """Concatenate clamp(r_{t-1}, -1, 1) to the FC features (modern-srwm)."""
    prev_reward_reset: bool = True
    """Feed 0 as the previous reward on an episode's first frame (proclab); False feeds the last
    episode's final reward there, as modern-srwm's actors did (the srwm-* presets)."""
    num_actions: int = NUM_ACTIONS
    """Number of policy logits (Procgen's 15 button combinations)."""
    hidden: int = 128
    """Residual width of the transformer-style cores (delta, srwm, fake_sr, sr_delta, no_carry_sr)."""
    num_layers: int = 2
    """Layers (memory sub-layer + feed-forward sub-layer) of the transformer-style cores."""
    num_heads: int = 8
    """Heads of the fast-weight / self-referential memory; num_heads * head_dim must equal hidden."""
    head_dim: int = 16
    """Per-head dimension d of the fast-weight / self-referential memory."""
    ff: int = 512
    """Inner width of the feed-forward sub-layers."""
    rnn_size: int = 256
    """Hidden size of the gru / lstm cores (modern-srwm LSTM: 256; interpreting-rl-behavior GRU: 64)."""
    rnn_layers: int = 1
    """Stacked layers of the gru / lstm cores."""
    detach_every_step: bool = False
    """Detach the carried state after every step, as the published modern-srwm code does (SRWM's
    W_q, W_k, w_b then get no gradient); default: backpropagate through time within an unroll."""
    torso_init: str = "torch"
    """Conv/FC init: torch (PyTorch defaults; Procgen paper, modern-srwm) or xavier (Xavier-uniform,
    zero bias; interpreting-rl-behavior)."""
    head_init: str = "orthogonal"
    """Head init: orthogonal (gain 0.01 policy, 1 value, zero bias) or torch (modern-srwm's defaults)."""

    def __post_init__(self):
        object.__setattr__(self, "widths", tuple(self.widths))  # a list when read back from JSON
        if self.core not in CORES:
            raise unknown_choice("agent core", self.core, CORES)
        if self.torso_init not in TORSO_INITS:
            raise unknown_choice("torso init", self.torso_init, TORSO_INITS)
        if self.head_init not in HEAD_INITS:
            raise unknown_choice("head init", self.head_init, HEAD_INITS)
        if self.torso not in TORSOS:
            raise unknown_choice("torso", self.torso, TORSOS)
        if self.pool not in POOLS:
            raise unknown_choice("pool", self.pool, POOLS)
        if self.torso == "nature" and len(self.widths) != len(NATURE_LAYERS):
            raise ProclabError(
                f"the nature torso has 3 convolutions: widths must have 3 entries, got {self.widths}."
            )
        sizes = {
            "widths": min(self.widths, default=0),
            "fc": self.fc,
            "num_actions": self.num_actions,
            "hidden": self.hidden,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "head_dim": self.head_dim,
            "ff": self.ff,
            "rnn_size": self.rnn_size,
            "rnn_layers": self.rnn_layers,
        }
        bad = [f"{k}={getattr(self, k)}" for k, v in sizes.items() if v < 1]
        if bad:
            raise ProclabError(f"agent sizes must be positive (and widths non-empty): {', '.join(bad)}.")
        if self.core in TRANSFORMER_CORES and self.num_heads * self.head_dim != self.hidden:
            raise ProclabError(
                f"num_heads * head_dim must equal hidden: {self.num_heads} * {self.head_dim} != "
                f"{self.hidden}."
            )


# modern-srwm, RL/torchbeast_procgen: its env server sends the new episode's first frame with the
# finished episode's last reward, which the model reads unmasked (only the core state is reset).
_SRWM = AgentConfig(fc=256, prev_reward=True, prev_reward_reset=False, head_init="torch")
_STATEFUL_FAST = ("delta", "srwm", "sr_delta")  # the cores whose published training detached the state


def _presets() -> dict[str, AgentConfig]:
    presets = {
        # Procgen paper / CleanRL: feed-forward IMPALA CNN, FC 256, orthogonal heads.
        "procgen": AgentConfig(core="none", fc=256),
        # interpreting-rl-behavior's CoinRun agent: FC 64, one-layer GRU 64, Xavier CNN.
        "interp-gru": AgentConfig(core="gru", fc=64, rnn_size=64, torso_init="xavier"),
    }
    for core in ("none", "lstm", "delta", "srwm", "fake_sr", "sr_delta", "no_carry_sr"):
        presets[f"srwm-{core}"] = replace(_SRWM, core=core)
    for core in _STATEFUL_FAST:  # the published gradient semantics (spec §0)
        presets[f"srwm-{core}-published"] = replace(_SRWM, core=core, detach_every_step=True)
    return presets


AGENT_PRESETS: dict[str, AgentConfig] = _presets()


def agent_preset(name: str) -> AgentConfig:
    """The preset called ``name``; a :class:`ProclabError` naming the valid ones otherwise."""
    if name not in AGENT_PRESETS:
        raise unknown_choice("agent preset", name, AGENT_PRESETS)
    return AGENT_PRESETS[name]
