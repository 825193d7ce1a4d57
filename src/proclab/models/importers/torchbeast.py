"""torchbeast / modern-srwm IMPALA agents (``model.tar``).

The file is ``torch.save`` of ``{model_state_dict, optimizer_state_dict, scheduler_state_dict,
stats, flags, best_valid_return}``; ``flags`` (the argparse options as a dict) says which core
the agent has (``use_lstm``, ``use_delta``, ``use_sr``, ``use_psr``, ``use_no_carry_sr``,
``use_smfwp``) and which game, mode and levels it trained on; ``stats["step"]`` counts its
steps. The network (spec ``srwm_impala_procgen.md`` §2):

* torso ``feat_convs.<i>.0`` (conv; ``.1`` is the max-pool), ``resnet1.<i>`` / ``resnet2.<i>``
  (``nn.Sequential(ReLU, Conv, ReLU, Conv)``: convolutions at ``.1`` and ``.3``), ``fc``
  (2048 x conv_scale -> 256), ReLU; then ``clamp(r_{t-1}, -1, 1)`` is appended (257 features);
* core ``core``: an ``nn.LSTM(257, 256)``, or a transformer-style stack: ``core.input_proj``,
  ``core.fwm_layers.<l>`` (the memory sub-layer: ``slow_net``, ``layer_norm``, ``out_linear``
  for Delta Net; ``W_y, W_q, W_k, w_b`` of shape ``(1, H, d, .)`` and ``out_linear`` for the SR
  layers; ``W_y`` ``(H, d, d)`` for Fake SR) and ``core.ff_layers.<l>`` (``layer_norm``,
  ``ff_layers.0``, ``ff_layers.3``); or nothing (heads on the 257 features);
* heads ``policy`` and ``baseline``.

The SR layers construct a LayerNorm they never apply; its tensors are dropped (and listed).
The previous reward is read unmasked: an episode's first frame sees the last episode's final
reward, which ``prev_reward_reset=False`` reproduces.
"""

from __future__ import annotations

from collections.abc import Mapping

from proclab.errors import ProclabError
from proclab.models.config import AgentConfig
from proclab.models.importers.base import Format, ImportedAgent, SourceFacts, SourceTensors, state_dict_of
from proclab.models.importers.layers import ImpalaNames, take_heads, take_impala_torso, take_rnn
from proclab.models.importers.source import SourceFile

NAMES = ImpalaNames(
    conv=lambda i: f"feat_convs.{i}.0",
    res=lambda i, j, k: f"resnet{j + 1}.{i}.{2 * k + 1}",
    fc="fc",
)
CORE_FLAGS = {  # flag -> proclab core
    "use_lstm": "lstm",
    "use_delta": "delta",
    "use_sr": "srwm",
    "use_psr": "fake_sr",
    "use_no_carry_sr": "no_carry_sr",
    "use_smfwp": "sr_delta",
}
UNSUPPORTED_FLAGS = ("use_deep_ff", "use_lt", "use_delta_rnn", "use_rec_delta", "use_dd")
SR_CORES = ("srwm", "no_carry_sr", "sr_delta")


def detect(source: SourceFile) -> bool:
    tensors = state_dict_of(source.payload)
    return tensors is not None and "feat_convs.0.0.weight" in tensors and "baseline.weight" in tensors


def _core_from_flags(flags: Mapping, path: str) -> str | None:
    for flag in UNSUPPORTED_FLAGS:
        if flags.get(flag):
            raise ProclabError(f"checkpoint {path!r} has a --{flag} core, which proclab does not implement")
    chosen = [core for flag, core in CORE_FLAGS.items() if flags.get(flag)]
    if len(chosen) > 1:
        raise ProclabError(f"checkpoint {path!r}: its flags select several cores ({', '.join(chosen)})")
    return chosen[0] if chosen else ("none" if flags else None)


def _core_from_tensors(src: SourceTensors) -> str:
    if "core.weight_ih_l0" in src:
        return "lstm"
    if "core.fwm_layers.0.slow_net.weight" in src:
        return "delta"
    if "core.fwm_layers.0.W_q" in src:
        head, cols = src.shape("core.fwm_layers.0.W_y")[-2:]
        if cols != head:
            return "sr_delta"
        raise ProclabError(
            f"checkpoint {src.path!r} has no flags, and an SRWM and a no-carry SRWM have the same tensors; "
            "add the 'flags' entry (use_sr or use_no_carry_sr) to the file"
        )
    if "core.fwm_layers.0.W_y" in src:
        return "fake_sr"
    return "none"


def _transformer(src: SourceTensors, core: str, in_dim: int) -> tuple[dict, dict, list[str]]:
    """Sizes, weights and dropped tensor names of a transformer-style core."""
    hidden = src.shape("core.input_proj.bias")[0]
    layers = 0
    while f"core.ff_layers.{layers}.layer_norm.weight" in src:
        layers += 1
    ff = src.shape("core.ff_layers.0.ff_layers.0.bias")[0]
    if core == "delta":
        heads = src.shape("core.fwm_layers.0.slow_net.weight")[0] - 3 * hidden
    else:
        heads = src.shape("core.fwm_layers.0.W_y")[-3]
    if heads < 1 or hidden % heads:
        raise ProclabError(f"checkpoint {src.path!r}: cannot split width {hidden} into heads (got {heads})")
    d = hidden // heads
    w = {
        "core.input_proj.weight": src.take("core.input_proj.weight", (hidden, in_dim)),
        "core.input_proj.bias": src.take("core.input_proj.bias", (hidden,)),
    }
    dropped = []
    for i in range(layers):
        mem, ffl = f"core.fwm_layers.{i}", f"core.ff_layers.{i}"
        w[f"core.{i}.out_proj.weight"] = src.take(f"{mem}.out_linear.weight", (hidden, hidden))
        if core == "delta":
            w[f"core.{i}.slow.weight"] = src.take(f"{mem}.slow_net.weight", (heads * (3 * d + 1), hidden))
            for p in ("weight", "bias"):
                w[f"core.{i}.norm.{p}"] = src.take(f"{mem}.layer_norm.{p}", (hidden,))
        else:
            dropped += [src.drop(f"{mem}.layer_norm.{p}") for p in ("weight", "bias")]
        if core == "fake_sr":
            w[f"core.{i}.W_y"] = src.take(f"{mem}.W_y", (heads, d, d))
        elif core in SR_CORES:
            y_cols = 3 * d + 1 if core == "sr_delta" else d
            for name, cols in (("W_y", y_cols), ("W_q", d), ("W_k", d), ("w_b", 4)):
                w[f"core.{i}.{name}"] = src.take(f"{mem}.{name}", (1, heads, d, cols))[0]
        for p in ("weight", "bias"):
            w[f"core.{i}.ff.norm.{p}"] = src.take(f"{ffl}.layer_norm.{p}", (hidden,))
        w[f"core.{i}.ff.fc1.weight"] = src.take(f"{ffl}.ff_layers.0.weight", (ff, hidden))
        w[f"core.{i}.ff.fc1.bias"] = src.take(f"{ffl}.ff_layers.0.bias", (ff,))
        w[f"core.{i}.ff.fc2.weight"] = src.take(f"{ffl}.ff_layers.3.weight", (hidden, ff))
        w[f"core.{i}.ff.fc2.bias"] = src.take(f"{ffl}.ff_layers.3.bias", (hidden,))
    sizes = {"hidden": hidden, "num_layers": layers, "num_heads": heads, "head_dim": d, "ff": ff}
    return sizes, w, dropped


def _facts(payload: Mapping) -> SourceFacts:
    flags = payload.get("flags") if isinstance(payload.get("flags"), Mapping) else {}
    stats = payload.get("stats") if isinstance(payload.get("stats"), Mapping) else {}
    env = str(flags.get("env", ""))
    game = env.removeprefix("procgen:procgen-").removesuffix("-v0") if env.startswith("procgen:") else None
    split = None
    if "num_levels" in flags:
        split = (
            f"{int(flags.get('start_level', 0))}:{int(flags['num_levels'])}" if flags["num_levels"] else "all"
        )
    step = stats.get("step")
    return SourceFacts(
        step=int(step) if step is not None else None,
        step_from='stats["step"]' if step is not None else None,
        game=game,
        mode=flags.get("distribution_mode"),
        split=split,
        said_by="flags (env, distribution_mode, start_level, num_levels)" if flags else None,
    )


def convert(source: SourceFile) -> ImportedAgent:
    payload = source.payload if isinstance(source.payload, Mapping) else {}
    flags = payload.get("flags") if isinstance(payload.get("flags"), Mapping) else {}
    src = SourceTensors(state_dict_of(source.payload) or {}, str(source.path))
    core = _core_from_flags(flags, src.path) or _core_from_tensors(src)
    widths, fc, weights = take_impala_torso(src, NAMES)
    features = fc + 1  # the clamped previous reward is appended
    sizes: dict = {}
    dropped: list[str] = []
    out_dim = features
    if core == "lstm":
        size, layers, rnn = take_rnn(src, "core", 4, features)
        weights.update(rnn)
        sizes = {"rnn_size": size, "rnn_layers": layers}
        out_dim = size
    elif core != "none":
        sizes, core_weights, dropped = _transformer(src, core, features)
        weights.update(core_weights)
        out_dim = sizes["hidden"]
    actions, heads = take_heads(src, "policy", "baseline", out_dim)
    weights.update(heads)
    src.finish()
    config = AgentConfig(
        core=core,
        widths=widths,
        fc=fc,
        num_actions=actions,
        prev_reward=True,
        prev_reward_reset=False,
        head_init="torch",
        **sizes,
    )
    conventions = {
        "observations": "RGB 64x64 uint8, channels first, divided by 255 inside the network",
        "actions": "Procgen's 15 button combinations, in Procgen's order",
        "state": "every state tensor multiplied by 1 - done before each step: zero on an episode's first frame",
        "previous_reward": "clamp(r_{t-1}, -1, 1) appended to the features, not zeroed on an episode's "
        "first frame (it sees the last episode's final reward)",
    }
    variant = "modern-srwm / torchbeast " + ({"none": "feed-forward"}.get(core, core))
    return ImportedAgent(variant, config, weights, _facts(payload), conventions, tuple(dropped))


FORMAT = Format("torchbeast", "torchbeast / modern-srwm IMPALA (model.tar)", detect, convert)
