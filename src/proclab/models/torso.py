"""The IMPALA ResNet torso (Espeholt et al. 2018) that all three seeds use.

Per width ``w``: Conv3x3(w) -> MaxPool(3, stride 2, pad 1) -> two pre-activation residual
blocks ``x + conv(relu(conv(relu(x))))``; then ReLU, flatten, Linear(fc), ReLU. Every ReLU is a
module and every activation has a :class:`~proclab.models.hooks.HookPoint`, so that hooks and
layer attributions (captum) see each one under a stable name. Nothing is in-place, so inputs
created under ``torch.inference_mode`` or shared with other code are never modified.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from proclab.models.hooks import HookPoint


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
    """Conv3x3 -> MaxPool(3, 2, pad 1) -> two residual blocks; halves the image size."""

    def __init__(self, in_channels: int, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, channels, 3, padding=1)
        self.hook_conv = HookPoint()
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.hook_pool = HookPoint()
        self.res0 = ResidualBlock(channels)
        self.res1 = ResidualBlock(channels)
        self.hook_out = HookPoint()

    def forward(self, x: Tensor) -> Tensor:
        x = self.hook_pool(self.pool(self.hook_conv(self.conv(x))))
        return self.hook_out(self.res1(self.res0(x)))


class ImpalaTorso(nn.Module):
    """Images ``(N, C, H, W)`` in [0, 1] -> features ``(N, fc)`` (after the final ReLU)."""

    def __init__(self, widths: tuple[int, ...], fc: int, in_channels: int = 3, image_size: int = 64):
        super().__init__()
        self.num_blocks = len(widths)
        size = image_size
        for i, (c_in, c_out) in enumerate(zip((in_channels, *widths[:-1]), widths, strict=True)):
            self.add_module(f"block{i}", ConvBlock(c_in, c_out))
            size = (size + 1) // 2  # MaxPool(3, 2, pad 1): ceil(size / 2)
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
