"""The batched T-REX loss against a slow per-pair, per-frame reference; the two-pass step against one pass."""

import math

import numpy as np
import pytest
import torch

from proclab.reward.demo_reader import Demos
from proclab.reward.loss import clip_rewards, distinct_frames, trex_loss
from proclab.reward.nets import RewardNetConfig
from proclab.reward.pairs import make_pairs
from proclab.reward.train import PairSet, RewardLearner, TrexConfig
from proclab.run.runtime import make_runtime


def tiny_demos(seed=0) -> Demos:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(25, 45, 6)
    frames = rng.integers(0, 256, (lengths.sum(), 3, 64, 64), dtype=np.uint8)
    rewards = rng.integers(0, 2, lengths.sum()).astype(np.float32)
    returns = np.add.reduceat(rewards, np.r_[0, np.cumsum(lengths)[:-1]]).astype(float) + np.arange(6) * 0.5
    return Demos(frames, rewards, lengths, returns, np.arange(6).astype(str))


def tiny_net():
    torch.manual_seed(0)
    conv = torch.nn.Sequential(
        torch.nn.Conv2d(3, 2, 8, stride=8), torch.nn.Tanh(), torch.nn.Flatten(), torch.nn.Linear(128, 1)
    )
    return lambda x: conv(x.float() / 255).squeeze(-1), conv


def reference_loss(net, frames, first, length, stride, lam):
    """One pair at a time, one frame at a time: log(1 + e^(R_w - R_b)) + lam * sum |r|, averaged."""
    total = 0.0
    for (f_w, f_b), n in zip(first.tolist(), length.tolist(), strict=True):
        r_w = [net(frames[f_w + k : f_w + k + 1])[0] for k in range(0, n, stride)]
        r_b = [net(frames[f_b + k : f_b + k + 1])[0] for k in range(0, n, stride)]
        R_w, R_b = sum(r_w), sum(r_b)
        p_better = torch.exp(R_b) / (torch.exp(R_w) + torch.exp(R_b))
        total = total - torch.log(p_better) + lam * sum(abs(r) for r in r_w + r_b)
    return total / len(length)


@pytest.mark.parametrize("stride", [1, 3])
def test_batched_loss_matches_slow_reference(stride):
    demos = tiny_demos()
    pairs = make_pairs(
        demos.lengths, demos.returns, 12, np.random.default_rng(0), min_len=5, max_len=20, stride=stride
    )
    ps = PairSet.build(pairs, np.arange(len(demos)), demos, "cpu")
    frames = torch.from_numpy(demos.frames)
    net, module = tiny_net()

    ref = reference_loss(net, frames, ps.first, ps.length, stride, lam=0.01)
    (g_ref,) = torch.autograd.grad(ref, module[0].weight)

    unique, inverse, mask = distinct_frames(ps.first, ps.length, stride)
    assert len(unique) < int(mask.sum()) * 2  # clips overlap: fewer distinct frames than clip frames
    loss, returns = trex_loss(clip_rewards(net(frames[unique]), inverse, mask), 0.01)
    (g,) = torch.autograd.grad(loss.mean(), module[0].weight)
    torch.testing.assert_close(loss.mean(), ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(g, g_ref, rtol=1e-4, atol=1e-6)
    # the loss is the Bradley-Terry cross-entropy of the returns, term by term
    bt = [math.log1p(math.exp(w - b)) for w, b in returns.tolist()]
    l1 = (loss - torch.tensor(bt)).detach()
    assert (l1 >= 0).all() and float(l1.sum()) > 0


def test_two_pass_step_equals_one_pass():
    """A batch larger than --frame-chunk takes the two-pass path; the update must be the same."""
    demos = tiny_demos(1)
    rt = make_runtime("cpu", "fp32")
    pairs = make_pairs(demos.lengths, demos.returns, 16, np.random.default_rng(0), min_len=5, max_len=25)
    grads = []
    for chunk in (10_000, 7):
        torch.manual_seed(0)
        cfg = TrexConfig(net=RewardNetConfig(arch="atari"), frame_chunk=chunk, lam_l1=0.01)
        learner = RewardLearner(cfg, demos, rt)
        learner.step(PairSet.build(pairs, np.arange(len(demos)), demos, "cpu"))
        grads.append(
            {name: p.grad.clone() for name, p in learner.net.named_parameters()}
        )  # this step's gradient
    for name, g in grads[0].items():
        assert g.abs().sum() > 0, name
        torch.testing.assert_close(grads[1][name], g, rtol=1e-4, atol=1e-6)
