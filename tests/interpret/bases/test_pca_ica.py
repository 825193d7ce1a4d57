"""The basis: exact round trips, directions vs increments, gradient projection vs finite differences,
ICA recovering planted non-Gaussian sources, and save/load."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from proclab.errors import ProclabError
from proclab.interpret.bases.pca_ica import Basis, BasisConfig


def planted(n: int = 4000, d: int = 12, k: int = 4, seed: int = 0):
    """States = per-unit offsets/scales of a random mix of k non-Gaussian sources + small Gaussian noise."""
    rng = np.random.default_rng(seed)
    sources = np.stack(
        [
            rng.laplace(size=n),
            rng.uniform(-1, 1, n) * 1.7,
            rng.exponential(size=n) - 1,
            np.sign(rng.normal(size=n)),
        ]
    )[:k].T
    sources = (sources - sources.mean(0)) / sources.std(0)
    mix = rng.normal(size=(k, d))
    x = sources @ mix + 0.01 * rng.normal(size=(n, d))
    x = x * rng.uniform(0.5, 3.0, d) + rng.normal(size=d) * 5
    return x, sources


@pytest.fixture(scope="module")
def basis() -> Basis:
    x, _ = planted()
    return Basis.fit(x, BasisConfig(n_ics=4, tol=1e-6), {"test": True})


def test_round_trips_are_exact(basis):
    x, _ = planted(n=50, seed=1)
    np.testing.assert_allclose(basis.from_pcs(basis.to_pcs(x)), x, atol=1e-9)
    s = basis.to_ics(x)
    np.testing.assert_allclose(basis.from_ics(s, basis.to_pcs(x)[:, basis.n_ics :]), x, atol=1e-9)
    # without the residual the state lands on the k-dim affine subspace, whose IC coordinates are s
    np.testing.assert_allclose(basis.to_ics(basis.from_ics(s)), s, atol=1e-9)


def test_coordinates_match_the_slow_definition(basis):
    """PCs = z-scored states (with sklearn's centring) times the components; ICs = standardised PCs times W^T."""
    x, _ = planted(n=30, seed=2)
    z = (x - basis.mean) / basis.std
    p = np.stack([[np.dot(zi - basis.pca_mean, c) for c in basis.components] for zi in z])
    np.testing.assert_allclose(basis.to_pcs(x), p, atol=1e-9)
    k = basis.n_ics
    u = p[:, :k] / np.sqrt(basis.pc_var[:k])
    np.testing.assert_allclose(basis.to_ics(x), u @ basis.unmixing.T, atol=1e-9)
    np.testing.assert_allclose(basis.to_coords(x, "pca"), p[:, :k], atol=1e-9)


def test_fitted_ics_are_white_and_pcs_decorrelated(basis):
    x, _ = planted()
    s = basis.to_ics(x)
    np.testing.assert_allclose(np.cov(s.T, bias=True), np.eye(basis.n_ics), atol=0.02)
    p = basis.to_pcs(x)
    np.testing.assert_allclose(p.var(0), basis.pc_var, rtol=1e-3)


@pytest.mark.parametrize("kind", ["pca", "ica"])
def test_increments_decompose_along_directions(basis, kind):
    rng = np.random.default_rng(3)
    d = basis.directions(kind)
    c = rng.normal(size=(5, basis.n_ics))
    np.testing.assert_allclose(basis.increment_coords(c @ d, kind), c, atol=1e-9)
    # a state step along direction m moves coordinate m only, by the step's size
    x, _ = planted(n=5, seed=4)
    moved = basis.to_coords(x + 0.5 * d[1], kind) - basis.to_coords(x, kind)
    np.testing.assert_allclose(moved, np.tile(0.5 * np.eye(basis.n_ics)[1], (5, 1)), atol=1e-9)


@pytest.mark.parametrize("kind", ["pca", "ica"])
def test_gradient_projection_matches_finite_differences(basis, kind):
    rng = np.random.default_rng(5)
    w = rng.normal(size=(basis.dim, 3))

    def f(h: np.ndarray) -> np.ndarray:  # a smooth nonlinear function of the state, one value per row
        return np.sum(np.tanh(h @ w / 10) ** 2, axis=1)

    def grad_f(h):
        t = torch.as_tensor(h, dtype=torch.float64).requires_grad_(True)
        torch.sum(torch.tanh(t @ torch.as_tensor(w) / 10) ** 2).backward()
        return t.grad.numpy()

    x, _ = planted(n=4, seed=6)
    projected = basis.project_gradient(grad_f(x), kind)
    eps = 1e-5
    k = basis.n_ics
    coords = basis.to_coords(x, kind)
    if kind == "ica":
        residual = basis.to_pcs(x)[:, k:]
        state = lambda c: basis.from_ics(c, residual)  # noqa: E731
    else:
        rest = basis.to_pcs(x)[:, k:]
        state = lambda c: basis.from_pcs(np.concatenate([c, rest], axis=1))  # noqa: E731
    np.testing.assert_allclose(state(coords), x, atol=1e-9)
    numeric = np.stack(
        [
            (f(state(coords + eps * np.eye(k)[m])) - f(state(coords - eps * np.eye(k)[m]))) / (2 * eps)
            for m in range(k)
        ],
        axis=1,
    )
    np.testing.assert_allclose(projected, numeric, rtol=1e-5, atol=1e-7)


def test_torch_in_torch_out_and_differentiable(basis):
    x, _ = planted(n=6, seed=7)
    t = torch.tensor(x, dtype=torch.float32, requires_grad=True)
    s = basis.to_ics(t)
    assert isinstance(s, torch.Tensor) and s.dtype == torch.float32
    np.testing.assert_allclose(s.detach().numpy(), basis.to_ics(x), rtol=1e-4, atol=1e-4)
    s[:, 2].sum().backward()
    # d s_2 / d h is the third column of the ICA projection; equal for every row
    expected = basis.to_ics(np.eye(basis.dim)) - basis.to_ics(np.zeros((1, basis.dim)))
    np.testing.assert_allclose(t.grad.numpy(), np.tile(expected[:, 2], (6, 1)), rtol=1e-4, atol=1e-6)
    back = basis.from_pcs(basis.to_pcs(t))
    assert isinstance(back, torch.Tensor)
    np.testing.assert_allclose(back.detach().numpy(), x, rtol=1e-4, atol=1e-3)


def test_ica_recovers_planted_sources():
    x, sources = planted(n=6000, seed=8)
    basis = Basis.fit(x, BasisConfig(n_ics=4, tol=1e-6), {})
    s = basis.to_ics(x)
    corr = np.abs(np.corrcoef(s.T, sources.T)[:4, 4:])
    # each IC matches one distinct source almost perfectly (a permutation up to sign)
    assert sorted(corr.argmax(1).tolist()) == [0, 1, 2, 3]
    assert corr.max(1).min() > 0.98
    assert basis.fit_info["ica_converged"]


def test_save_load_round_trip(basis, tmp_path):
    path = tmp_path / "basis.npz"
    basis.save(path)
    loaded = Basis.load(path)
    x, _ = planted(n=10, seed=9)
    np.testing.assert_array_equal(loaded.to_ics(x), basis.to_ics(x))
    assert loaded.provenance == {"test": True}
    assert loaded.config == basis.config
    assert loaded.fit_info == basis.fit_info


def test_bad_inputs(tmp_path):
    x, _ = planted(n=200)
    with pytest.raises(ProclabError, match="n_ics 13"):
        Basis.fit(x, BasisConfig(n_ics=13), {})
    with pytest.raises(ProclabError, match="more than 12 points"):
        Basis.fit(x[:12], BasisConfig(n_ics=4), {})
    flat = np.concatenate([x[:, :3], np.ones((200, 9))], axis=1)  # only 3 units vary
    with pytest.raises(ProclabError, match="choose n_ics <= 3"):
        Basis.fit(flat, BasisConfig(n_ics=4), {})
    basis = Basis.fit(flat, BasisConfig(n_ics=3), {})  # constant units keep sigma = 1, no NaN
    assert np.isfinite(basis.to_ics(flat)).all()
    with pytest.raises(ProclabError, match="direction kind"):
        basis.directions("nmf")
    (tmp_path / "junk.npz").write_text("not a basis")
    with pytest.raises(ProclabError, match=r"junk.npz.* is corrupt or truncated"):
        Basis.load(tmp_path / "junk.npz")
