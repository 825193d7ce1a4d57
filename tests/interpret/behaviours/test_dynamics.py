"""IC dynamics on a planted linear system: the lag-1 Jacobian is M^T, the lag-1 xcorr is (M Sigma)^T."""

import numpy as np
import torch

from proclab.interpret.behaviours.dynamics import (
    cosine,
    extrema_xcorr,
    group_mean,
    per_sample_jacobians,
    per_sample_xcorr,
    seriation,
)
from proclab.store import EpisodeStore, ShardWriter

K = 4
M = np.array([[0.5, -0.3, 0.0, 0.2], [0.4, 0.3, -0.2, 0.0], [0.0, 0.5, 0.2, -0.4], [-0.3, 0.0, 0.4, 0.4]])


def linear_rollouts(n: int, T: int, seed: int = 0) -> np.ndarray:
    """``s(t+1) = M s(t) + eps`` started from the stationary distribution."""
    rng = np.random.default_rng(seed)
    s = np.zeros((n, T, K))
    x = rng.normal(size=(n, K))
    for _ in range(50):  # burn-in to stationarity
        x = x @ M.T + rng.normal(size=(n, K))
    for t in range(T):
        s[:, t] = x
        x = x @ M.T + rng.normal(size=(n, K))
    return s


def stationary_cov() -> np.ndarray:
    sigma = np.eye(K)
    for _ in range(500):
        sigma = M @ sigma @ M.T + np.eye(K)
    return sigma


def test_lag1_xcorr_is_sigma_mt():
    s = linear_rollouts(4000, 10)
    X = per_sample_xcorr(s, 3).mean(0)
    expected = stationary_cov() @ M.T  # = (M Sigma)^T: rows earlier, columns later
    clear = np.abs(expected) > 0.1
    assert clear.sum() >= 10
    assert (np.sign(X[1][clear]) == np.sign(expected[clear])).all()
    np.testing.assert_allclose(X[1], expected, atol=0.1)
    np.testing.assert_allclose(X[0], stationary_cov(), atol=0.15)
    # the normalisation is per (sample, t) pair, by hand for one entry
    i, j, lag = 1, 2, 2
    by_hand = np.mean([s[m, t, i] * s[m, t + lag, j] for m in range(50) for t in range(10 - lag)])
    assert np.isclose(per_sample_xcorr(s[:50], 3).mean(0)[lag, i, j], by_hand)


def test_jacobian_of_a_planted_linear_system_is_mt(tmp_path):
    """A saliency store written as `analyze saliency --target ic:0-3` would, for the linear system
    (identity basis), gives J[1] = M^T and J[2] = (M^2)^T."""
    step, T = 3, 5
    with ShardWriter(tmp_path / "store.zarr") as w:
        for sample in range(2):
            x0 = torch.randn(K, dtype=torch.float64, requires_grad=True)
            states = [x0]
            for _ in range(T - 1):
                states.append(torch.as_tensor(M) @ states[-1])
            rows = {}
            for j in range(K):
                grads = torch.autograd.grad(
                    states[step][j], states[: step + 1], retain_graph=True, allow_unused=True
                )
                g = np.zeros((T, K))
                for t, gt in enumerate(grads):
                    g[t] = 0 if gt is None else gt.numpy()
                rows[f"grad/ic_{j}/ic"] = g.astype(np.float32)
            w.append(
                {"obs": np.zeros((T, 3, 64, 64), np.uint8), **rows},
                {"sample": sample, "env_grads": True, "target_step": step},
            )
    J, samples, env_grads, k_star = per_sample_jacobians(EpisodeStore(tmp_path / "store.zarr"), K)
    assert (
        J.shape == (2, step + 1, K, K) and k_star == step and samples.tolist() == [0, 1] and env_grads.all()
    )
    np.testing.assert_allclose(J[0, 0], np.eye(K), atol=1e-6)
    np.testing.assert_allclose(J[0, 1], M.T, atol=1e-6)
    np.testing.assert_allclose(J[1, 2], (M @ M).T, atol=1e-6)


def test_group_means_extrema_seriation_cosine():
    rng = np.random.default_rng(0)
    per = rng.normal(size=(6, 2, 3, 3))
    labels = np.array([0, 1, 0, 1, 1, 0])
    g = group_mean(per, labels, 3)
    np.testing.assert_allclose(g[1], per[[1, 3, 4]].mean(0))
    assert np.isnan(g[2]).all()
    s = linear_rollouts(300, 6)
    top, bottom = extrema_xcorr(s, 2, share=0.05)
    hi = np.quantile(s[..., 0].reshape(-1), 0.95)
    pairs = [s[m, t, 1] for m in range(300) for t in range(5) if s[m, t + 1, 0] >= hi]
    assert np.isclose(top[1, 1, 0], np.mean(pairs))
    assert top[1, 0, 0] > 0 > bottom[1, 0, 0]  # IC 0 is positively autocorrelated (M[0, 0] = 0.5)
    order = seriation(np.array([[1.0, 0, 0.9], [0, 1, 0], [0.9, 0, 1]]))
    assert sorted(order.tolist()) == [0, 1, 2] and abs(order.tolist().index(0) - order.tolist().index(2)) == 1
    np.testing.assert_allclose(np.diag(cosine(rng.normal(size=(4, 7)))), 1)


def test_extrema_per_behaviour_use_the_members_and_the_global_thresholds():
    s = linear_rollouts(300, 6)
    labels = np.arange(300) % 3
    labels[:2] = 3  # behaviour 3 has two members: too few to condition on
    top, bottom = extrema_xcorr(s, 2, 0.05, labels, 4)
    assert top.shape == bottom.shape == (5, 3, K, K)
    lo = np.quantile(s[..., 1].reshape(-1), 0.05)  # over all 300 samples, not the behaviour's
    members = np.flatnonzero(labels == 1)
    pairs = [s[m, t, 0] for m in members for t in range(4) if s[m, t + 2, 1] <= lo]
    assert np.isclose(bottom[1, 2, 0, 1], np.mean(pairs))
    assert np.isnan(top[3]).all() and np.isnan(bottom[3]).all()
    whole_top, whole_bottom = extrema_xcorr(s, 2, 0.05)
    np.testing.assert_array_equal(top[-1], whole_top)
    np.testing.assert_array_equal(bottom[-1], whole_bottom)
