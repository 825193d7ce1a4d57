"""The world model's building blocks: MLPs, LayerNorm GRU cells, residual down-blocks, conv encoder/decoder.

Two choices exist in two forms (``WorldModelConfig.rssm_cell`` / ``encoder_block``; docs/fidelity.md):
the seed's (:class:`NormGRUCell`, :class:`SeedResBlockDown`) and the ones proclab used first
(:class:`LayerNormGRUCell`, :class:`ResBlockDown`), kept so that models saved with them still load.

Sizes are arguments; :mod:`proclab.worldmodel.model` wires them from a
:class:`~proclab.worldmodel.config.WorldModelConfig`. Frames are ``(N, 3, 64, 64)`` floats in
[0, 1]; convolutions accept channels-last inputs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from proclab.worldmodel.distributions import clamp_st


def mlp(in_dim: int, hidden: tuple[int, ...], out_dim: int, norm: bool = False) -> nn.Sequential:
    """``Linear -> [LayerNorm] -> ELU`` per hidden width, then a last ``Linear`` to ``out_dim``."""
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_dim, width), *([nn.LayerNorm(width)] if norm else []), nn.ELU()]
        in_dim = width
    layers.append(nn.Linear(in_dim, out_dim))
    return nn.Sequential(*layers)


class NormGRUCell(nn.Module):
    """The seed's RSSM cell (pydreamer's ``NormGRUCell``): a GRU with a LayerNorm on each gate's input.

    ``[r_i, u_i, n_i] = W_i x``, ``[r_h, u_h, n_h] = W_h h`` (no biases), LayerNorms with eps 1e-3::

        r = sigmoid(LN_r(r_i + r_h)),  u = sigmoid(LN_u(u_i + u_h)),  n = tanh(LN_n(n_i + r * n_h))
        h' = u * n + (1 - u) * h

    The reset gate scales only the hidden part of the candidate, as in ``nn.GRUCell``, and the
    update gate has no bias. Runs in float32 whatever the autocast (the state is carried every step).
    """

    def __init__(self, in_dim: int, size: int):
        super().__init__()
        self.weight_ih = nn.Linear(in_dim, 3 * size, bias=False)
        self.weight_hh = nn.Linear(size, 3 * size, bias=False)
        self.ln_reset = nn.LayerNorm(size, eps=1e-3)
        self.ln_update = nn.LayerNorm(size, eps=1e-3)
        self.ln_newval = nn.LayerNorm(size, eps=1e-3)

    def forward(self, x: Tensor, h: Tensor) -> Tensor:
        with torch.autocast(x.device.type, enabled=False):
            h = h.float()
            r_i, u_i, n_i = self.weight_ih(x.float()).chunk(3, -1)
            r_h, u_h, n_h = self.weight_hh(h).chunk(3, -1)
            reset = torch.sigmoid(self.ln_reset(r_i + r_h))
            update = torch.sigmoid(self.ln_update(u_i + u_h))
            new = torch.tanh(self.ln_newval(n_i + reset * n_h))
            return update * new + (1 - update) * h


class LayerNormGRUCell(nn.Module):
    """A GRU cell whose reset, update and candidate pre-activations are each layer-normalised.

    ``[r, u, c] = LN(W [x, h])`` per gate; ``h' = u * tanh(r * c) + (1 - u) * h`` with
    ``u = sigmoid(u - 1)``, so that a fresh cell leans towards keeping its state (DreamerV2).
    The reset gate scales the whole candidate (input part too). ``rssm_cell="dreamer_gru"``; not
    the seed's cell (:class:`NormGRUCell`). Runs in float32 whatever the autocast.
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


class SeedResBlockDown(nn.Module):
    """The seed's residual down-block: ``pool(conv(lrelu(LN(conv(LN(x)))))) + conv1x1(pool(x))``.

    No activation before the first conv; LeakyReLU slope 0.01 (PyTorch's default); each LayerNorm
    normalises over channels and space with an affine weight per (channel, row, column), so the
    block is built for one input size ``hw``.
    """

    def __init__(self, c_in: int, c_out: int, hw: int):
        super().__init__()
        self.norm0 = nn.LayerNorm([c_in, hw, hw])
        self.conv0 = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.norm1 = nn.LayerNorm([c_out, hw, hw])
        self.conv1 = nn.Conv2d(c_out, c_out, 3, padding=1)
        self.shortcut = nn.Conv2d(c_in, c_out, 1)

    def forward(self, x: Tensor) -> Tensor:
        h = self.conv0(self.norm0(x))
        h = self.conv1(F.leaky_relu(self.norm1(h), 0.01))
        return F.max_pool2d(h, 2) + self.shortcut(F.max_pool2d(x, 2))


class ResBlockDown(nn.Module):
    """Pre-activation residual down-block: ``pool(conv(act(LN(conv(act(LN(x))))))) + pool(conv1x1(x))``.

    LeakyReLU slope 0.2 before both convs; the norm is a LayerNorm over channels and space with a
    per-channel affine (``GroupNorm`` with one group). ``encoder_block="preact"``; not the seed's
    block (:class:`SeedResBlockDown`).
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

    def __init__(self, in_dim: int, depth: int, out_channels: int = 3):
        super().__init__()
        self.depth = depth
        self.linear = nn.Linear(in_dim, 32 * depth)
        chans = (32 * depth, 4 * depth, 2 * depth, depth, out_channels)
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


def shift_frames(frames: Tensor, shift: Tensor) -> Tensor:
    """``frames`` ``(B, C, H, W)`` translated by ``shift`` ``(B, 2)`` pixels (x right, y down), bilinear,
    edges repeated; differentiable in both. Runs in float32."""
    with torch.autocast(frames.device.type, enabled=False):
        x, shift = frames.float(), shift.float()
        B, _, H, W = x.shape
        theta = x.new_zeros(B, 2, 3)
        theta[:, 0, 0] = theta[:, 1, 1] = 1
        theta[:, 0, 2] = -2 * shift[:, 0] / W  # sampling from the left moves the picture right
        theta[:, 1, 2] = -2 * shift[:, 1] / H
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        return F.grid_sample(x, grid, padding_mode="border", align_corners=False)


class CameraMotion(nn.Module):
    """The camera's shift at step ``k`` as the shift at ``k - 1`` plus a change: velocity persists, and what
    changes it is in the action, the agent's surroundings and the state.

    Input: the frame being copied (the previous one, in [0, 1]), the action that drives the step, the
    previous shift and the RSSM features ``[h, z]``. A small convolutional stack reads the frame (where the
    platforms, walls and crates are decides whether a move is stopped), the rest is an MLP whose last layer
    starts at zero, so an untrained model extrapolates the last move at constant velocity (on the seed's
    CoinRun agent that alone halves the one-step error of repeating the last frame; docs/worldmodel.md).
    The shift is clamped to ``max_shift`` pixels on each axis, straight-through: a shift pushed past the
    clamp still gets the gradient that pulls it back (a plain clamp has none there, and a motion model that
    ran to the clamp over a 16-step window stayed there: docs/worldmodel.md). ``read_shift`` is the previous
    shift as the MLP reads it (the model passes it detached while training: read as an input, a 16-step chain
    multiplies the MLP's Jacobians; added on, it is the identity).
    """

    def __init__(self, feat_dim: int, num_actions: int, max_shift: float, depth: int = 16, hidden: int = 128):
        super().__init__()
        self.max_shift = max_shift
        self.convs = nn.Sequential(
            nn.Conv2d(3, depth, 4, 2, 1),
            nn.ELU(),
            nn.Conv2d(depth, 2 * depth, 4, 2, 1),
            nn.ELU(),
            nn.Conv2d(2 * depth, 2 * depth, 4, 2, 1),
            nn.ELU(),
        )  # 64 -> 8
        self.frame = nn.Linear(2 * depth * 8 * 8, hidden)
        self.state = nn.Linear(feat_dim, hidden, bias=False)
        self.out = nn.Sequential(
            nn.ELU(), nn.Linear(hidden + num_actions + 2, hidden), nn.ELU(), nn.Linear(hidden, 2)
        )
        nn.init.zeros_(self.out[-1].weight)
        nn.init.zeros_(self.out[-1].bias)

    def forward(
        self,
        frame: Tensor,
        action: Tensor,
        prev_shift: Tensor,
        feat: Tensor,
        read_shift: Tensor | None = None,
    ) -> Tensor:
        x = self.frame(self.convs(frame).flatten(1)) + self.state(feat)
        scaled = ((prev_shift if read_shift is None else read_shift) / self.max_shift).to(x.dtype)
        change = self.out(torch.cat([x, action.to(x.dtype), scaled], -1)).float()
        return clamp_st(prev_shift.float() + change, -self.max_shift, self.max_shift)


class FrameRefiner(nn.Module):
    """The residual that turns the previous frame, moved with the camera, into the next one.

    A small U-Net reads the moved frame and the frame before it was moved (where the agent, which the camera
    follows, still stands), with the state ``[h, z]`` and the shift added at its 16x16 bottleneck, and
    returns an RGB residual in (-1, 1) (tanh: the next frame stays within reach of [0, 1] whatever the
    net does, so a dream fed back through the copy cannot run away): new content is drawn where it
    appears (the strip the camera uncovers, the agent's new pose, a coin taken), in place and next to what the frame already shows, which a decoder
    that redraws a whole frame from a vector cannot do in a few thousand updates. Its last layer starts at
    zero, so an untrained refiner leaves the moved copy as it is.
    """

    def __init__(self, feat_dim: int, max_shift: float, depth: int = 16):
        super().__init__()
        self.max_shift = max(max_shift, 1.0)
        d = depth
        self.down1 = nn.Conv2d(6, d, 4, 2, 1)  # 64 -> 32
        self.down2 = nn.Conv2d(d, 2 * d, 4, 2, 1)  # 32 -> 16
        self.state = nn.Linear(feat_dim + 2, 2 * d)
        self.mid = nn.Conv2d(2 * d, 2 * d, 3, 1, 1)
        self.up1 = nn.ConvTranspose2d(2 * d, d, 4, 2, 1)  # 16 -> 32
        self.up2 = nn.ConvTranspose2d(2 * d, d, 4, 2, 1)  # 32 -> 64
        self.out = nn.Conv2d(d + 6, 3, 3, 1, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, moved: Tensor, prev: Tensor, feat: Tensor, shift: Tensor | None) -> Tensor:
        frames = torch.cat([moved.float(), prev.float()], 1)
        shift = feat.new_zeros(feat.shape[0], 2) if shift is None else shift.to(feat.dtype) / self.max_shift
        x1 = F.elu(self.down1(frames))
        x2 = F.elu(self.down2(x1)) + self.state(torch.cat([feat, shift], -1))[:, :, None, None]
        u1 = F.elu(self.up1(F.elu(self.mid(x2))))
        u2 = F.elu(self.up2(torch.cat([u1, x1], 1)))
        return torch.tanh(self.out(torch.cat([u2, frames], 1)).float())
