"""The torso's pooling without autograd (separable maxima of strided views) against PyTorch's kernel and a
loop over every window: the same values bit for bit, in fp32 and bf16, contiguous and channels-last, on
even and odd sizes; with autograd, PyTorch's kernel and its gradient."""

import pytest
import torch
import torch.nn.functional as F

from proclab.models.torso import MaxPool3x3


def windows_max(x: torch.Tensor) -> torch.Tensor:
    """The reference: each output the maximum of its 3x3 window (stride 2, one pixel of padding)."""
    H, W = x.shape[-2:]
    out = torch.empty(*x.shape[:-2], (H + 1) // 2, (W + 1) // 2, dtype=x.dtype)
    for i in range(out.shape[-2]):
        for j in range(out.shape[-1]):
            rows = slice(max(2 * i - 1, 0), min(2 * i + 2, H))
            cols = slice(max(2 * j - 1, 0), min(2 * j + 2, W))
            out[..., i, j] = x[..., rows, cols].amax(dim=(-2, -1))
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("size", [16, 15, 8, 3])
@pytest.mark.parametrize("channels_last", [False, True])
def test_pooling_without_autograd_is_exact(dtype, size, channels_last):
    x = torch.randn(3, 5, size, size + 2).to(dtype)
    x[0, 0, :2, :2] = 7.0  # a tie across two windows
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        fast = MaxPool3x3()(x)
    assert fast.dtype == dtype
    assert torch.equal(fast, F.max_pool2d(x, 3, stride=2, padding=1))
    assert torch.equal(fast, windows_max(x))
    with torch.no_grad():
        assert torch.equal(MaxPool3x3()(x), fast)


def test_pooling_with_autograd_is_pytorchs_kernel():
    x = torch.randn(2, 4, 9, 9, requires_grad=True)
    MaxPool3x3()(x).sum().backward()
    y = x.detach().clone().requires_grad_(True)
    F.max_pool2d(y, 3, stride=2, padding=1).sum().backward()
    assert torch.equal(x.grad, y.grad)
