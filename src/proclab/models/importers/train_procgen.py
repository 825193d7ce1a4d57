"""train-procgen-pytorch checkpoints: interpreting-rl-behavior, its forks, goal-misgeneralization
and procgen-tools maze agents.

The file is ``torch.save({"model_state_dict": ..., "optimizer_state_dict": ...})`` (some forks:
``state_dict``, or the bare state dict), named ``model_<steps>.pth``. The network
(``CategoricalPolicy``):

* ``embedder``: an IMPALA ResNet, ``embedder.block{1,2,3}.conv`` and
  ``embedder.block{1,2,3}.res{1,2}.conv{1,2}`` (widths 16/32/32 times a scale), ReLU, flatten,
  ``embedder.fc`` (-> H), ReLU; or the Nature CNN ``embedder.layers.{0,2,4}`` (convolutions) and
  ``embedder.layers.7`` (the linear layer);
* optionally ``gru.gru``: an ``nn.GRU(H, H)`` whose state is multiplied by ``1 - done`` before
  each step, i.e. reset to zero on an episode's first frame;
* ``fc_policy`` (H -> 15) and ``fc_value`` (H -> 1).

Observations are RGB 64x64, channels first, divided by 255. A learned ``init_hx`` parameter,
where present, seeds the very first step of training only (every later episode starts from the
zero state the mask gives), so proclab starts every episode from zero and leaves it unused.
"""

from __future__ import annotations

import re

from proclab.errors import ProclabError
from proclab.models.config import AgentConfig
from proclab.models.importers.base import Format, ImportedAgent, SourceFacts, SourceTensors, state_dict_of
from proclab.models.importers.layers import ImpalaNames, take_heads, take_impala_torso, take_rnn
from proclab.models.importers.source import STEPS_IN_NAME, SourceFile
from proclab.models.torso import NATURE_LAYERS, nature_output_size

NAMES = ImpalaNames(
    conv=lambda i: f"embedder.block{i + 1}.conv",
    res=lambda i, j, k: f"embedder.block{i + 1}.res{j + 1}.conv{k + 1}",
    fc="embedder.fc",
)
NATURE_CONVS, NATURE_FC = (0, 2, 4), 7  # indices in embedder.layers (nn.Sequential with ReLUs between)


def detect(source: SourceFile) -> bool:
    tensors = state_dict_of(source.payload)
    return (
        tensors is not None
        and "fc_policy.weight" in tensors
        and any(k.startswith("embedder.") for k in tensors)
    )


def _nature_torso(src: SourceTensors) -> tuple[tuple[int, ...], int, dict]:
    out, widths, in_ch = {}, [], 3
    for i, (layer, (k, _)) in enumerate(zip(NATURE_CONVS, NATURE_LAYERS, strict=True)):
        width = src.shape(f"embedder.layers.{layer}.weight")[0]
        out[f"torso.conv{i}.weight"] = src.take(f"embedder.layers.{layer}.weight", (width, in_ch, k, k))
        out[f"torso.conv{i}.bias"] = src.take(f"embedder.layers.{layer}.bias", (width,))
        widths.append(width)
        in_ch = width
    fc, flat = src.shape(f"embedder.layers.{NATURE_FC}.weight")
    side = nature_output_size()
    if flat != widths[-1] * side * side:
        raise ProclabError(
            f"checkpoint {src.path!r}: the Nature CNN's linear layer takes {flat} features, but Procgen's "
            f"64x64 frames give {widths[-1]}*{side}*{side} = {widths[-1] * side * side} (it was built for "
            "another image size)"
        )
    out["torso.fc.weight"] = src.take(f"embedder.layers.{NATURE_FC}.weight", (fc, flat))
    out["torso.fc.bias"] = src.take(f"embedder.layers.{NATURE_FC}.bias", (fc,))
    return tuple(widths), fc, out


def convert(source: SourceFile) -> ImportedAgent:
    src = SourceTensors(state_dict_of(source.payload) or {}, str(source.path))
    nature = "embedder.layers.0.weight" in src
    widths, fc, weights = _nature_torso(src) if nature else take_impala_torso(src, NAMES)
    core, size, layers = "none", fc, 1
    if "gru.gru.weight_ih_l0" in src:
        size, layers, rnn = take_rnn(src, "gru.gru", 3, fc)
        weights.update(rnn)
        core = "gru"
    ignored = tuple(src.drop(n) for n in ("init_hx",) if n in src)
    actions, heads = take_heads(src, "fc_policy", "fc_value", size)
    weights.update(heads)
    src.finish()
    config = AgentConfig(
        core=core,
        torso="nature" if nature else "impala",
        widths=widths,
        fc=fc,
        num_actions=actions,
        rnn_size=size,
        rnn_layers=layers,
    )
    match = re.match(STEPS_IN_NAME, source.path.name)
    facts = SourceFacts(
        step=int(match.group(1)) if match else None,
        step_from="file name model_<steps>.pth" if match else None,
    )
    conventions = {
        "observations": "RGB 64x64, channels first, divided by 255",
        "actions": "Procgen's 15 button combinations, in Procgen's order",
        "state": "GRU state multiplied by 1 - done before each step: zero on an episode's first frame"
        if core == "gru"
        else "no state",
        "previous_reward": "not an input",
    }
    variant = (
        "train-procgen-pytorch "
        + ("NatureModel" if nature else "ImpalaModel")
        + (" + GRU" if core == "gru" else "")
    )
    return ImportedAgent(variant, config, weights, facts, conventions, ignored)


FORMAT = Format(
    "train-procgen",
    "train-procgen-pytorch (interpreting-rl-behavior, goal-misgeneralization, procgen-tools)",
    detect,
    convert,
)
