"""The image torsos: the IMPALA ResNet (Espeholt et al. 2018) that all three seeds use, and the
Nature CNN (Mnih et al. 2015) that imported agents may have.

IMPALA, per width ``w``: Conv3x3(w) -> MaxPool(3, stride 2) -> two pre-activation residual
blocks ``x + conv(relu(conv(relu(x))))``; then ReLU, flatten, Linear(fc), ReLU. The pooling pads
one pixel on every side (PyTorch's ``padding=1``, every PyTorch code base) or, with
``pool="same"``, only after the image as XLA's ``SAME`` padding does (Flax agents): the two put
the 3x3 windows one pixel apart, so an imported Flax agent needs its own. Every ReLU is a
module and every activation has a :class:`~proclab.models.hooks.HookPoint`, so that hooks and
layer attributions (captum) see each one under a stable name. Nothing is in-place, so inputs
created under ``torch.inference_mode`` or shared with other code are never modified.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from proclab.models.hooks import HookPoint

POOLS = ("torch", "same")
TORSOS = ("impala", "nature")
NATURE_LAYERS = ((8, 4), (4, 2), (3, 1))  # (kernel, stride) of the Nature CNN's three convolutions


class SamePadMaxPool(nn.Module):
    """MaxPool(3, stride 2) with XLA's ``SAME`` padding: ``ceil(n / 2)`` outputs, the padding
    split as ``(total // 2, total - total // 2)``, i.e. on even sizes one pixel after the image."""

    def forward(self, x: Tensor) -> Tensor:
        pads = []
        for n in (x.shape[-1], x.shape[-2]):  # F.pad lists the last dimension first
            total = max(((n + 1) // 2 - 1) * 2 + 3 - n, 0)
            pads += [total // 2, total - total // 2]
        return F.max_pool2d(F.pad(x, pads, value=float("-inf")), 3, stride=2)


class MaxPool3x3(nn.Module):
    """MaxPool(3, stride 2, padding 1), as PyTorch's, computed without autograd as two separable maxima of
    strided views (rows, then columns) of the input padded with ``-inf``.

    Why: on a CPU, PyTorch's pooling kernel on channels-last bf16 maps costs as much as the convolution
    before it (CoinRun's first block, 64 rows: 4.1 ms against 3.8), and the separable maxima take 1.9.
    The values are the same bit for bit (a maximum is exact). With autograd the kernel is kept: its
    gradient goes to one element of a tie, where the maxima's would be split."""

    def forward(self, x: Tensor) -> Tensor:
        if torch.is_grad_enabled() and x.requires_grad:
            return F.max_pool2d(x, 3, stride=2, padding=1)
        rows, cols = (x.shape[-2] + 1) // 2, (x.shape[-1] + 1) // 2
        p = F.pad(x, (1, 1, 1, 1), value=float("-inf"))
        r = torch.maximum(
            torch.maximum(p[..., 0 : 2 * rows : 2, :], p[..., 1 : 2 * rows + 1 : 2, :]),
            p[..., 2 : 2 * rows + 2 : 2, :],
        )
        return torch.maximum(
            torch.maximum(r[..., 0 : 2 * cols : 2], r[..., 1 : 2 * cols + 1 : 2]),
            r[..., 2 : 2 * cols + 2 : 2],
        )


class ResidualBlock(nn.Module):
    """``x + conv1(relu(conv0(relu(x))))`` with 3x3 convolutions (biases on)."""

    def __init__(self, channels: int):
        super().__init__()
        self.relu0 = nn.ReLU()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.hook_hidden = HookPoint()  # relu(conv0(relu(x)))
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.hook_out = HookPoint()

    def forward(self, x: Tensor) -> Tensor:
        h = self.hook_hidden(self.relu1(self.conv0(self.relu0(x))))
        return self.hook_out(x + self.conv1(h))


class ConvBlock(nn.Module):
    """Conv3x3 -> MaxPool(3, 2) -> two residual blocks; halves the image size (rounding up)."""

    def __init__(self, in_channels: int, channels: int, pool: str = "torch"):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, channels, 3, padding=1)
        self.hook_conv = HookPoint()
        self.pool = MaxPool3x3() if pool == "torch" else SamePadMaxPool()
        self.hook_pool = HookPoint()
        self.res0 = ResidualBlock(channels)
        self.res1 = ResidualBlock(channels)
        self.hook_out = HookPoint()

    def forward(self, x: Tensor) -> Tensor:
        x = self.hook_pool(self.pool(self.hook_conv(self.conv(x))))
        return self.hook_out(self.res1(self.res0(x)))


class ImpalaTorso(nn.Module):
    """Images ``(N, C, H, W)`` in [0, 1] -> features ``(N, fc)`` (after the final ReLU)."""

    def __init__(
        self,
        widths: tuple[int, ...],
        fc: int,
        in_channels: int = 3,
        image_size: int = 64,
        pool: str = "torch",
    ):
        super().__init__()
        self.num_blocks = len(widths)
        size = image_size
        for i, (c_in, c_out) in enumerate(zip((in_channels, *widths[:-1]), widths, strict=True)):
            self.add_module(f"block{i}", ConvBlock(c_in, c_out, pool))
            size = (size + 1) // 2  # both poolings give ceil(size / 2)
        self.relu = nn.ReLU()
        self.hook_relu = HookPoint()  # (N, widths[-1], size, size), the last spatial map
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(widths[-1] * size * size, fc)
        self.fc_relu = nn.ReLU()
        self.hook_fc = HookPoint()
        self.out_dim = fc
        self.channels_last = False  # set by Agent.channels_last(); inputs are then made channels-last

    def blocks(self) -> list[ConvBlock]:
        return [getattr(self, f"block{i}") for i in range(self.num_blocks)]

    def forward(self, x: Tensor) -> Tensor:
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        for block in self.blocks():
            x = block(x)
        x = self.hook_relu(self.relu(x))
        return self.hook_fc(self.fc_relu(self.fc(self.flatten(x))))

    def init_xavier(self) -> None:
        """Xavier-uniform weights and zero biases on every conv and the FC (interpreting-rl-behavior)."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d | nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)


def nature_output_size(image_size: int = 64) -> int:
    """Side of the Nature CNN's last feature map for a square image (4 for Procgen's 64x64 frames)."""
    for k, s in NATURE_LAYERS:
        image_size = (image_size - k) // s + 1
    return image_size


class NatureTorso(nn.Module):
    """The Nature CNN: Conv8x8/4 -> ReLU -> Conv4x4/2 -> ReLU -> Conv3x3/1 -> ReLU, flatten,
    Linear(fc), ReLU; ``widths`` are the three convolutions' channels (32, 64, 64 originally).

    Hook points: ``hook_conv<i>`` after each convolution's ReLU, then, as in :class:`ImpalaTorso`,
    ``hook_relu`` (the last spatial map) and ``hook_fc`` (the torso's output).
    """

    def __init__(self, widths: tuple[int, ...], fc: int, in_channels: int = 3, image_size: int = 64):
        super().__init__()
        if len(widths) != len(NATURE_LAYERS):
            raise ValueError(f"the Nature CNN has {len(NATURE_LAYERS)} convolutions, got widths {widths}")
        for i, (c_in, c_out, (k, s)) in enumerate(
            zip((in_channels, *widths[:-1]), widths, NATURE_LAYERS, strict=True)
        ):
            self.add_module(f"conv{i}", nn.Conv2d(c_in, c_out, k, stride=s))
            self.add_module(f"relu{i}", nn.ReLU())
            self.add_module(f"hook_conv{i}", HookPoint())
        size = nature_output_size(image_size)
        self.num_convs = len(NATURE_LAYERS)
        self.hook_relu = HookPoint()
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(widths[-1] * size * size, fc)
        self.fc_relu = nn.ReLU()
        self.hook_fc = HookPoint()
        self.out_dim = fc
        self.channels_last = False

    def forward(self, x: Tensor) -> Tensor:
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        for i in range(self.num_convs):
            x = getattr(self, f"hook_conv{i}")(getattr(self, f"relu{i}")(getattr(self, f"conv{i}")(x)))
        x = self.hook_relu(x)
        return self.hook_fc(self.fc_relu(self.fc(self.flatten(x))))

    init_xavier = ImpalaTorso.init_xavier


def build_torso(
    kind: str, widths: tuple[int, ...], fc: int, pool: str = "torch"
) -> ImpalaTorso | NatureTorso:
    """The torso an :class:`~proclab.models.AgentConfig` names."""
    if kind == "nature":
        return NatureTorso(widths, fc)
    return ImpalaTorso(widths, fc, pool=pool)
