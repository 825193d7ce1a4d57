"""Straight-through sampling, balanced KL and the uniformity loss against slow, written-out references."""

import math

import pytest
import torch

from proclab.worldmodel.distributions import action_st, balanced_kl, clamp_st, sample_st, uniformity_loss


def kl_reference(post: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
    """KL(post || prior) per row, summed over the categoricals, with explicit loops and log-probabilities."""
    rows = []
    for b in range(post.shape[0]):
        total = post.new_zeros(())
        for i in range(post.shape[1]):
            log_p = post[b, i] - torch.logsumexp(post[b, i], 0)
            log_q = prior[b, i] - torch.logsumexp(prior[b, i], 0)
            for c in range(post.shape[2]):
                total = total + log_p[c].exp() * (log_p[c] - log_q[c])
        rows.append(total)
    return torch.stack(rows)


def uniformity_reference(v: torch.Tensor, diagonal: bool) -> torch.Tensor:
    """The seed's sum over the whole B x B matrix with exp(1) on its diagonal, or the off-diagonal sum."""
    total = v.new_zeros(())
    for i in range(v.shape[0]):
        for j in range(v.shape[0]):
            if i != j:
                total = total + torch.exp(-((v[i] - v[j]) ** 2).sum())
            elif diagonal:
                total = total + math.e
    return torch.log(total)


@pytest.mark.parametrize("balance", [0.8, 0.3])
def test_balanced_kl_matches_the_reference_and_splits_the_gradient(balance):
    torch.manual_seed(0)
    post = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    prior = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    weights = torch.rand(3, dtype=torch.float64)

    fast = balanced_kl(post, prior, balance)
    g_post, g_prior = torch.autograd.grad((fast * weights).sum(), [post, prior])
    ref = kl_reference(post, prior)
    r_post, r_prior = torch.autograd.grad((ref * weights).sum(), [post, prior])

    torch.testing.assert_close(fast, ref)  # the value is the plain KL whatever the balance
    torch.testing.assert_close(g_post, (1 - balance) * r_post)  # the posterior moves by 1 - balance
    torch.testing.assert_close(g_prior, balance * r_prior)  # the prior by balance
    assert (ref > 0).all()


@pytest.mark.parametrize("diagonal", [True, False])
def test_uniformity_loss_matches_the_double_loop(diagonal):
    torch.manual_seed(1)
    v = torch.nn.functional.normalize(torch.randn(6, 8, dtype=torch.float64), dim=1).requires_grad_(True)
    fast, ref = uniformity_loss(v, diagonal), uniformity_reference(v, diagonal)
    torch.testing.assert_close(fast, ref)
    torch.testing.assert_close(torch.autograd.grad(fast, v)[0], torch.autograd.grad(ref, v)[0])
    # identical vectors are the worst case: every pair contributes exp(0); the seed adds 4 e
    same = v.detach()[:1].repeat(4, 1)
    expected = math.log(12 + 4 * math.e) if diagonal else math.log(12)
    assert float(uniformity_loss(same, diagonal)) == pytest.approx(expected)
    assert float(uniformity_loss(v.detach()[:1], diagonal)) == (1.0 if diagonal else 0.0)


def test_the_seed_diagonal_damps_the_uniformity_gradient():
    """Same minimiser, smaller steps: the gradient shrinks by S / (S + B e), S the off-diagonal sum."""
    torch.manual_seed(3)
    v = torch.nn.functional.normalize(torch.randn(5, 4, dtype=torch.float64), dim=1).requires_grad_(True)
    (g_seed,) = torch.autograd.grad(uniformity_loss(v, True), v)
    (g_off,) = torch.autograd.grad(uniformity_loss(v, False), v)
    s = float(uniformity_reference(v.detach(), False).exp())
    torch.testing.assert_close(g_seed, g_off * s / (s + 5 * math.e))


def test_straight_through_sample_is_one_hot_forward_and_softmax_backward():
    torch.manual_seed(2)
    logits = torch.randn(4000, 3, 5, requires_grad=True)
    w = torch.randn(4000, 3, 5)
    y = sample_st(logits)
    assert torch.equal(y.detach().sum(-1), torch.ones(4000, 3))
    assert set(y.detach().unique().tolist()) == {0.0, 1.0}
    (grad,) = torch.autograd.grad((y * w).sum(), logits)
    (ref,) = torch.autograd.grad((logits.softmax(-1) * w).sum(), logits)
    torch.testing.assert_close(grad, ref)
    # the draws follow softmax(logits): compare frequencies of a shared distribution
    shared = torch.tensor([2.0, 0.0, -1.0, 1.0, 0.5]).expand(20000, 5)
    freq = sample_st(shared).mean(0)
    torch.testing.assert_close(freq, shared[0].softmax(-1), atol=0.015, rtol=0)
    modal = sample_st(logits, modal=True).detach()
    assert torch.equal(modal.argmax(-1), logits.argmax(-1))


def test_agent_action_is_modal_with_the_gradient_of_the_log_probabilities():
    torch.manual_seed(3)
    logits = torch.randn(7, 15, requires_grad=True)
    w = torch.randn(7, 15)
    a = action_st(logits)
    assert torch.equal(a.detach(), torch.nn.functional.one_hot(logits.argmax(-1), 15).float())
    (grad,) = torch.autograd.grad((a * w).sum(), logits)
    (ref,) = torch.autograd.grad((logits.log_softmax(-1) * w).sum(), logits)
    torch.testing.assert_close(grad, ref)


def test_a_straight_through_clamp_passes_the_gradient_once():
    """The frames fed back and to the agent are clamped to [0, 1] straight-through: the backward pass is the
    identity, inside the range as outside (a clamp whose own gradient leaked through doubled it inside)."""
    image = torch.tensor([-0.5, 0.0, 0.25, 0.999, 1.0, 3.0], requires_grad=True)
    w = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    out = clamp_st(image)
    torch.testing.assert_close(out, torch.tensor([0.0, 0.0, 0.25, 0.999, 1.0, 1.0]))
    (grad,) = torch.autograd.grad((out * w).sum(), image)
    torch.testing.assert_close(grad, w)
