"""CleanRL ``ppo_procgen`` and PufferLib ``ProcgenResnet`` agents.

Both save ``torch.save(agent.state_dict())`` (CleanRL's ``.cleanrl_model``) of one network:
``network.{0,1,2}.conv`` and ``network.{0,1,2}.res_block{0,1}.conv{0,1}`` (the IMPALA ResNet,
16/32/32 channels, or ``cnn_width`` times 1/2/2 in PufferLib), then Flatten, ReLU,
``network.5`` (Linear 2048 -> 256), ReLU; heads ``actor`` (-> 15) and ``critic`` (PufferLib:
``value``). Observations arrive NHWC uint8 and are permuted to NCHW and divided by 255 inside.
ReLU after the flatten equals ReLU before it, so this is proclab's torso exactly.

PufferLib's ``LSTMWrapper`` puts the network under ``policy.`` and adds ``recurrent``, an
``nn.LSTM`` between the torso and the heads. The wrapper itself never resets that state; proclab
zeroes it on an episode's first frame, which differs from a trainer that carried it across
episodes only on those first frames (docs/import.md).
"""

from __future__ import annotations

from proclab.models.config import AgentConfig
from proclab.models.importers.base import Format, ImportedAgent, SourceTensors, state_dict_of
from proclab.models.importers.layers import ImpalaNames, take_heads, take_impala_torso, take_rnn
from proclab.models.importers.source import SourceFile

FC_INDEX = 5  # network = [ConvSequence x3, Flatten, ReLU, Linear, ReLU]


def _names(prefix: str) -> ImpalaNames:
    return ImpalaNames(
        conv=lambda i: f"{prefix}network.{i}.conv",
        res=lambda i, j, k: f"{prefix}network.{i}.res_block{j}.conv{k}",
        fc=f"{prefix}network.{FC_INDEX}",
    )


def _prefix(tensors: dict) -> str | None:
    for prefix in ("", "policy."):
        if f"{prefix}network.0.conv.weight" in tensors and f"{prefix}actor.weight" in tensors:
            return prefix
    return None


def detect(source: SourceFile) -> bool:
    tensors = state_dict_of(source.payload)
    return tensors is not None and _prefix(tensors) is not None


def convert(source: SourceFile) -> ImportedAgent:
    tensors = state_dict_of(source.payload) or {}
    prefix = _prefix(tensors) or ""
    src = SourceTensors(tensors, str(source.path))
    widths, fc, weights = take_impala_torso(src, _names(prefix))
    core, size, layers = "none", fc, 1
    if "recurrent.weight_ih_l0" in src:
        size, layers, rnn = take_rnn(src, "recurrent", 4, fc)
        weights.update(rnn)
        core = "lstm"
    value = f"{prefix}critic" if f"{prefix}critic.weight" in src else f"{prefix}value"
    actions, heads = take_heads(src, f"{prefix}actor", value, size)
    weights.update(heads)
    src.finish()
    config = AgentConfig(
        core=core, widths=widths, fc=fc, num_actions=actions, rnn_size=size, rnn_layers=layers
    )
    conventions = {
        "observations": "RGB 64x64 uint8, NHWC permuted to NCHW and divided by 255 inside the network",
        "actions": "Procgen's 15 button combinations, in Procgen's order",
        "state": "LSTM state zeroed on an episode's first frame" if core == "lstm" else "no state",
        "previous_reward": "not an input",
    }
    variant = (
        "PufferLib" + (" LSTMWrapper" if core == "lstm" else "") if value.endswith("value") else "CleanRL"
    )
    return ImportedAgent(variant, config, weights, conventions=conventions)


FORMAT = Format("cleanrl", "CleanRL ppo_procgen / PufferLib ProcgenResnet", detect, convert)
