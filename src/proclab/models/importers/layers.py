"""The layers the formats share, as each names them, mapped onto proclab's names.

Every format has the IMPALA ResNet torso (conv3x3 -> max-pool 3/2 -> two pre-activation
residual blocks, per width; ReLU, flatten, Linear, ReLU), two linear heads, and some a
PyTorch ``nn.GRU``/``nn.LSTM``; they differ only in names and storage layout. An
:class:`ImpalaNames` says where a format keeps each torso tensor and how to bring its kernels to
PyTorch's layout; the ``take_*`` functions infer the sizes from the shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

from proclab.errors import ProclabError
from proclab.models.importers.base import SourceTensors, count_blocks

IMAGE_SIZE, IMAGE_CHANNELS = 64, 3


def _same(x: Tensor) -> Tensor:
    return x


@dataclass(frozen=True)
class ImpalaNames:
    """Where a format keeps the torso's tensors (module paths, without ``.weight``/``.bias``)."""

    conv: Callable[[int], str]
    """Block ``i``'s first convolution."""
    res: Callable[[int, int, int], str]
    """Block ``i``, residual block ``j`` (0/1), convolution ``k`` (0/1)."""
    fc: str
    weight: str = "weight"
    bias: str = "bias"
    kernel: Callable[[Tensor], Tensor] = _same
    """A convolution kernel in the source's layout -> ``(out, in, kh, kw)``."""
    dense: Callable[[Tensor, tuple[int, int, int]], Tensor] = lambda w, chw: w
    """The FC weight in the source's layout -> ``(out, C*H*W)`` over the NCHW flatten; gets ``(C, H, W)``."""


def feature_side(blocks: int, image: int = IMAGE_SIZE) -> int:
    """Side of the last feature map: each block's pooling halves it, rounding up."""
    for _ in range(blocks):
        image = (image + 1) // 2
    return image


def take_impala_torso(
    src: SourceTensors, names: ImpalaNames
) -> tuple[tuple[int, ...], int, dict[str, Tensor]]:
    """``(widths, fc, weights)`` with ``weights`` under proclab's ``torso.*`` names."""
    w, b = names.weight, names.bias
    blocks = count_blocks(src, lambda i: f"{names.conv(i)}.{w}")
    if blocks == 0:
        raise ProclabError(f"checkpoint {src.path!r} lacks tensor {names.conv(0) + '.' + w!r}")
    out: dict[str, Tensor] = {}
    widths: list[int] = []
    in_ch = IMAGE_CHANNELS
    for i in range(blocks):
        kernel = src.take(f"{names.conv(i)}.{w}", transform=names.kernel)
        width = kernel.shape[0]
        if tuple(kernel.shape) != (width, in_ch, 3, 3):
            raise ProclabError(
                f"checkpoint {src.path!r}: tensor {names.conv(i) + '.' + w!r} is not a 3x3 convolution "
                f"from {in_ch} channels (got {tuple(kernel.shape)} in PyTorch's layout)"
            )
        out[f"torso.block{i}.conv.weight"] = kernel
        out[f"torso.block{i}.conv.bias"] = src.take(f"{names.conv(i)}.{b}", (width,))
        for j in range(2):
            for k in range(2):
                base = names.res(i, j, k)
                out[f"torso.block{i}.res{j}.conv{k}.weight"] = src.take(
                    f"{base}.{w}", (width, width, 3, 3), names.kernel
                )
                out[f"torso.block{i}.res{j}.conv{k}.bias"] = src.take(f"{base}.{b}", (width,))
        widths.append(width)
        in_ch = width
    side = feature_side(blocks)
    flat = widths[-1] * side * side
    fc = src.shape(f"{names.fc}.{b}")[0]
    out["torso.fc.weight"] = src.take(
        f"{names.fc}.{w}", (fc, flat), lambda t: names.dense(t, (widths[-1], side, side))
    )
    out["torso.fc.bias"] = src.take(f"{names.fc}.{b}", (fc,))
    return tuple(widths), fc, out


def take_heads(
    src: SourceTensors, policy: str, value: str, in_dim: int, transpose: bool = False
) -> tuple[int, dict[str, Tensor]]:
    """``(num_actions, weights)`` of the policy and value heads (``transpose``: stored ``in x out``)."""
    t = (lambda x: x.T) if transpose else None
    actions = src.shape(f"{policy}.bias")[0]
    return actions, {
        "heads.policy.weight": src.take(
            f"{policy}.{'kernel' if transpose else 'weight'}", (actions, in_dim), t
        ),
        "heads.policy.bias": src.take(f"{policy}.bias", (actions,)),
        "heads.value.weight": src.take(f"{value}.{'kernel' if transpose else 'weight'}", (1, in_dim), t),
        "heads.value.bias": src.take(f"{value}.bias", (1,)),
    }


def take_rnn(src: SourceTensors, prefix: str, gates: int, in_dim: int) -> tuple[int, int, dict[str, Tensor]]:
    """``(size, layers, weights)`` of an ``nn.GRU`` (3 gates) or ``nn.LSTM`` (4) named ``prefix``.

    proclab's gated layers keep ``nn.GRU``'s / ``nn.LSTM``'s gate order and parameter shapes
    (``core.<l>.weight_ih`` ...), so the tensors move over unchanged.
    """
    size = src.shape(f"{prefix}.weight_hh_l0")[1]
    layers = count_blocks(src, lambda i: f"{prefix}.weight_ih_l{i}")
    out = {}
    for layer in range(layers):
        rows = gates * size
        for part, cols in (("ih", in_dim if layer == 0 else size), ("hh", size)):
            out[f"core.{layer}.weight_{part}"] = src.take(f"{prefix}.weight_{part}_l{layer}", (rows, cols))
            out[f"core.{layer}.bias_{part}"] = src.take(f"{prefix}.bias_{part}_l{layer}", (rows,))
    return size, layers, out
