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

# proclab's hook names and the activation labels of procgen-tools (its module hooks on a train-procgen-pytorch
# policy: ``<module path>_out``), which count blocks and residual blocks from 1 where proclab counts from 0.
_LABELS = (
    ("torso.block{b}.hook_conv", "embedder.block{B}.conv_out"),
    ("torso.block{b}.hook_pool", "embedder.block{B}.maxpool_out"),
    ("torso.block{b}.res{r}.hook_hidden", "embedder.block{B}.res{R}.relu2_out"),
    ("torso.block{b}.res{r}.hook_out", "embedder.block{B}.res{R}.resadd_out"),
    ("torso.hook_relu", "embedder.relu3_out"),
    ("torso.hook_fc", "embedder.relufc_out"),
    ("heads.hook_logits", "fc_policy_out"),
    ("heads.hook_value", "fc_value_out"),
)


def _renamed(name: str, pairs) -> str | None:
    """``name`` matched against each ``(from, to)`` template pair, its numbers carried over (lower-case
    placeholders count from 0, upper-case from 1); None when no template matches."""
    for source, target in pairs:
        regex = re.escape(source)
        for key in "bBrR":
            regex = regex.replace(re.escape("{" + key + "}"), f"(?P<{key}>\\d+)")
        if (m := re.fullmatch(regex, name)) is not None:
            found = {k: int(v) for k, v in m.groupdict().items()}
            numbers = {**{k.upper(): v + 1 for k, v in found.items() if k.islower()},
                       **{k.lower(): v - 1 for k, v in found.items() if k.isupper()}}  # fmt: skip
            return target.format(**numbers)
    return None


def procgen_tools_label(hook: str) -> str | None:
    """The procgen-tools label of proclab's hook point ``hook`` on an imported train-procgen-pytorch agent
    (``torso.block1.res0.hook_out`` -> ``embedder.block2.res1.resadd_out``, the cheese vector's layer), or
    None where procgen-tools has none. ``torso.block<i>.hook_out`` is the same tensor as its last residual
    block's ``hook_out`` (``res2.resadd_out``); docs/import.md has the whole table."""
    block = re.fullmatch(r"torso\.block(\d+)\.hook_out", hook)
    if block is not None:
        hook = f"torso.block{block.group(1)}.res1.hook_out"
    return _renamed(hook, _LABELS)


def hook_of_label(label: str) -> str:
    """proclab's hook point for a procgen-tools label (the inverse of :func:`procgen_tools_label`); a one-line
    error for a label proclab has no hook point for (a convolution before its ReLU, ``flatten_out``)."""
    hook = _renamed(label, [(b, a) for a, b in _LABELS])
    if hook is None:
        raise ProclabError(
            f"procgen-tools label {label!r} has no proclab hook point; labels with one: "
            + ", ".join(b for _, b in _LABELS)
        )
    return hook


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
