"""GAE against a slow, obvious reference: explicit discounted sums of TD residuals."""

import numpy as np
import pytest
import torch

from proclab.rl.gae import gae


def reference_gae(rewards, values, dones, next_value, gamma, lam):
    """A_t = sum_l (gamma*lam)^l delta_{t+l}, stopping after the first done at or after t."""
    T, N = rewards.shape
    adv = np.zeros((T, N))
    for i in range(N):
        for t in range(T):
            total, weight = 0.0, 1.0
            for k in range(t, T):
                v_next = next_value[i] if k == T - 1 else values[k + 1, i]
                nonterminal = 0.0 if dones[k, i] else 1.0
                delta = rewards[k, i] + gamma * v_next * nonterminal - values[k, i]
                total += weight * delta
                if dones[k, i]:
                    break
                weight *= gamma * lam
            adv[t, i] = total
    return adv, adv + values


@pytest.mark.parametrize(("gamma", "lam"), [(0.999, 0.95), (0.99, 1.0), (0.9, 0.0)])
def test_gae_matches_reference(gamma, lam):
    rng = np.random.default_rng(0)
    T, N = 17, 5
    rewards = rng.normal(size=(T, N))
    values = rng.normal(size=(T, N))
    dones = rng.random((T, N)) < 0.15
    next_value = rng.normal(size=N)
    adv, ret = gae(
        torch.tensor(rewards, dtype=torch.float32),
        torch.tensor(values, dtype=torch.float32),
        torch.tensor(dones),
        torch.tensor(next_value, dtype=torch.float32),
        gamma,
        lam,
    )
    ref_adv, ref_ret = reference_gae(rewards, values, dones, next_value, gamma, lam)
    np.testing.assert_allclose(adv.numpy(), ref_adv, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ret.numpy(), ref_ret, rtol=1e-4, atol=1e-4)


def test_lambda_one_no_done_is_discounted_return_minus_value():
    T = 6
    r = torch.arange(1.0, T + 1).unsqueeze(1)
    v = torch.zeros(T, 1)
    _, ret = gae(r, v, torch.zeros(T, 1, dtype=torch.bool), torch.tensor([10.0]), 0.5, 1.0)
    expected = [sum(0.5**k * (t + k + 1) for k in range(T - t)) + 0.5 ** (T - t) * 10 for t in range(T)]
    np.testing.assert_allclose(ret.squeeze(1).numpy(), expected, rtol=1e-6)
