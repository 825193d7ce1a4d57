"""The world model's building blocks: MLPs, a LayerNorm GRU cell, residual down-blocks, conv encoder/decoder.

Sizes are arguments; :mod:`proclab.worldmodel.model` wires them from a
:class:`~proclab.worldmodel.config.WorldModelConfig`. Frames are ``(N, 3, 64, 64)`` floats in
[0, 1]; convolutions accept channels-last inputs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def mlp(in_dim: int, hidden: tuple[int, ...], out_dim: int, norm: bool = False) -> nn.Sequential:
    """``Linear -> [LayerNorm] -> ELU`` per hidden width, then a last ``Linear`` to ``out_dim``."""
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_dim, width), *([nn.LayerNorm(width)] if norm else []), nn.ELU()]
        in_dim = width
    layers.append(nn.Linear(in_dim, out_dim))
    return nn.Sequential(*layers)


class LayerNormGRUCell(nn.Module):
    """A GRU cell whose reset, update and candidate pre-activations are each layer-normalised.

    ``[r, u, c] = LN(W [x, h])`` per gate; ``h' = u * tanh(r * c) + (1 - u) * h`` with
    ``u = sigmoid(u - 1)``, so that a fresh cell leans towards keeping its state (DreamerV2).
    Runs in float32 whatever the autocast: the deterministic state is carried over every step.
    """

    def __init__(self, in_dim: int, size: int):
        super().__init__()
        self.size = size
        self.linear = nn.Linear(in_dim + size, 3 * size, bias=False)
        self.norm_weight = nn.Parameter(torch.ones(3, size))
        self.norm_bias = nn.Parameter(torch.zeros(3, size))

    def forward(self, x: Tensor, h: Tensor) -> Tensor:
        with torch.autocast(x.device.type, enabled=False):
            gates = self.linear(torch.cat([x.float(), h.float()], -1)).view(-1, 3, self.size)
            gates = F.layer_norm(gates, (self.size,)) * self.norm_weight + self.norm_bias
            reset, cand, update = gates.unbind(1)
            update = torch.sigmoid(update - 1)
            return update * torch.tanh(torch.sigmoid(reset) * cand) + (1 - update) * h.float()


class ResBlockDown(nn.Module):
    """BigGAN-style residual down-block: ``pool(conv(act(LN(conv(act(LN(x))))))) + pool(conv1x1(x))``.

    The norm is a LayerNorm over channels and space (``GroupNorm`` with one group).
    """

    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.norm0 = nn.GroupNorm(1, c_in)
        self.conv0 = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.norm1 = nn.GroupNorm(1, c_out)
        self.conv1 = nn.Conv2d(c_out, c_out, 3, padding=1)
        self.shortcut = nn.Conv2d(c_in, c_out, 1)

    def forward(self, x: Tensor) -> Tensor:
        h = self.conv0(F.leaky_relu(self.norm0(x), 0.2))
        h = self.conv1(F.leaky_relu(self.norm1(h), 0.2))
        return F.max_pool2d(h, 2) + F.max_pool2d(self.shortcut(x), 2)


class FrameEncoder(nn.Module):
    """DreamerV2's conv encoder: four ``Conv(k4, s2) -> ELU`` with depth x1, x2, x4, x8; 64x64 -> 2x2."""

    def __init__(self, depth: int):
        super().__init__()
        chans = (3, depth, 2 * depth, 4 * depth, 8 * depth)
        self.convs = nn.ModuleList(nn.Conv2d(chans[i], chans[i + 1], 4, stride=2) for i in range(4))
        self.out_dim = 8 * depth * 2 * 2

    def forward(self, x: Tensor) -> Tensor:
        for conv in self.convs:
            x = F.elu(conv(x))
        return x.flatten(1)


class ImageDecoder(nn.Module):
    """``Linear -> (32 d, 1, 1) -> ConvT`` kernels 5, 5, 6, 6 (stride 2) with channels 4d, 2d, d, 3;
    1 -> 5 -> 13 -> 30 -> 64 pixels, ELU between layers, plus 0.5 (the mean frame is grey)."""

    def __init__(self, in_dim: int, depth: int):
        super().__init__()
        self.depth = depth
        self.linear = nn.Linear(in_dim, 32 * depth)
        chans = (32 * depth, 4 * depth, 2 * depth, depth, 3)
        self.convs = nn.ModuleList(
            nn.ConvTranspose2d(chans[i], chans[i + 1], k, stride=2) for i, k in enumerate((5, 5, 6, 6))
        )

    def forward(self, x: Tensor) -> Tensor:
        x = self.linear(x).view(-1, 32 * self.depth, 1, 1)
        for i, conv in enumerate(self.convs):
            x = conv(x)
            if i < len(self.convs) - 1:
                x = F.elu(x)
        return x + 0.5
