"""The sparse dictionary and the NMF codes as coordinates: against slow references (a per-row top-k, scipy's
NNLS, a hand-computed reconstruction), identity edits bit-exact, saved and loaded unchanged."""

import numpy as np
import pytest
import torch
from scipy.optimize import nnls

from proclab.interpret.bases.coordinates import LinearCoordinates, variance_explained
from proclab.interpret.bases.nmf import NmfCoordinates, nnls_fista
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.bases.sparse_dictionary import DictionaryConfig, SparseDictionary, topk_codes
from proclab.models import AgentConfig, build_agent
from support import TINY_AGENT, held_agent, hold

D = 8


def sparse_states(n=3000, atoms=16, active=2, seed=0) -> np.ndarray:
    """States made of ``active`` of ``atoms`` unit directions with positive weights, plus a little noise."""
    rng = np.random.default_rng(seed)
    dirs = rng.normal(size=(atoms, D))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    codes = np.zeros((n, atoms))
    for i in range(n):
        codes[i, rng.choice(atoms, active, replace=False)] = rng.uniform(0.5, 2.0, active)
    return codes @ dirs + 0.01 * rng.normal(size=(n, D))


@pytest.fixture(scope="module")
def fitted():
    x = sparse_states()
    config = DictionaryConfig(expansion=2, k=2, steps=1500, batch=256, lr=3e-3, dead_after=2000)
    return x, SparseDictionary.fit(x, config)


def test_topk_keeps_the_k_largest_positive_entries():
    pre = torch.tensor([[0.5, -1.0, 2.0, 0.1], [-1.0, -2.0, -0.5, -3.0], [1.0, 1.5, 0.0, 3.0]])
    expected = []
    for row in pre.tolist():  # the reference: sort, keep two, clip at zero
        keep = sorted(range(4), key=lambda j: -row[j])[:2]
        expected.append([max(row[j], 0.0) if j in keep else 0.0 for j in range(4)])
    assert topk_codes(pre, 2).tolist() == expected


def reference_encode(d: SparseDictionary, x: np.ndarray) -> np.ndarray:
    out = []
    for row in x:
        pre = ((row - d.mean) / d.std - d.b_pre) @ d.w_enc + d.b_enc
        keep = np.argsort(-pre, kind="stable")[: d.config.k]
        code = np.zeros(d.k)
        code[keep] = np.maximum(pre[keep], 0)
        out.append(code)
    return np.array(out)


def test_fit_reconstructs_sparse_states_and_reports_its_quality_truthfully(fitted):
    x, d = fitted
    codes = reference_encode(d, x)
    np.testing.assert_allclose(d.encode(torch.as_tensor(x)).numpy(), codes, atol=1e-9)
    z = (x - d.mean) / d.std
    zr = codes @ d.w_dec + d.b_pre
    explained = 1 - ((z - zr) ** 2).sum() / ((z - z.mean(0)) ** 2).sum()
    info = d.fit_info
    assert info["variance_explained"] == pytest.approx(explained, rel=1e-9)
    assert variance_explained(d, x, d.mean, d.std) == pytest.approx(explained, rel=1e-9)
    assert explained > 0.9, explained  # two active atoms describe states made of two directions
    share = (codes > 0).mean(0)
    assert info["dead"] == int((share == 0).sum()) and info["dense"] == int((share > 0.1).sum())
    assert ((codes > 0).sum(1) <= 2).all() and np.allclose(np.linalg.norm(d.w_dec, axis=1), 1)


def test_identity_edits_are_bit_exact_and_holds_move_along_the_atom(fitted):
    _, d = fitted
    h = torch.randn(7, D, dtype=torch.float64)
    c = d.encode(h)
    assert torch.equal(d.write(h, c, c), h)
    dims = torch.tensor([3, -1, 0, 5, -1, 1, 2])
    values = torch.linspace(0, 1, 7, dtype=torch.float64)
    out = hold(d, h, dims, values)
    for r in range(7):
        if dims[r] < 0:
            assert torch.equal(out[r], h[r])
        else:
            m = int(dims[r])
            moved = h[r].numpy() + (float(values[r]) - float(c[r, m])) * d.directions()[m]
            np.testing.assert_allclose(out[r].numpy(), moved, atol=1e-12)
    torch.manual_seed(0)
    agent = build_agent(AgentConfig(core="gru", rnn_size=D, **TINY_AGENT)).eval()
    obs = torch.randint(0, 256, (4, 3, 3, 64, 64), dtype=torch.uint8)
    firsts = torch.zeros(4, 3, dtype=torch.bool)
    firsts[0] = True
    none = held_agent(agent, d, "core.0.h", torch.full((3,), -1), torch.zeros(3))
    with torch.no_grad():
        plain, plain_state = agent.unroll(obs, agent.initial_state(3), firsts)
        held, held_state = none.unroll(obs, agent.initial_state(3), firsts)
    assert torch.equal(plain.logits, held.logits) and torch.equal(
        plain_state["core.0.h"], held_state["core.0.h"]
    )


def test_saved_dictionary_encodes_the_same(fitted, tmp_path):
    x, d = fitted
    back = SparseDictionary.load(d.save(tmp_path / "dictionary.npz"))
    h = torch.as_tensor(x[:50])
    assert torch.equal(back.encode(h), d.encode(h)) and back.fit_info == d.fit_info


def test_nmf_codes_are_the_nonnegative_least_squares_solution():
    rng = np.random.default_rng(1)
    h = rng.uniform(0, 1, (4, D))
    y = np.abs(rng.normal(size=(20, D)))
    gram_max = np.linalg.eigvalsh(h @ h.T).max()
    got = nnls_fista(torch.as_tensor(y), torch.as_tensor(h), 1 / gram_max, 3000).numpy()
    for row, code in zip(y, got, strict=True):
        ref, _ = nnls(h.T, row)
        np.testing.assert_allclose(code, ref, atol=1e-6)
    x = rng.normal(size=(300, D)) @ rng.normal(size=(D, D))
    basis = Basis.fit(x, BasisConfig(n_ics=3), {})
    z = (x - basis.mean) / basis.std
    shift = z.min(0)
    coords = NmfCoordinates(basis, h, shift)
    codes = coords.encode(torch.as_tensor(x[:10])).numpy()
    for row, code in zip(np.clip(z[:10] - shift, 0, None), codes, strict=True):
        np.testing.assert_allclose(code, nnls(h.T, row)[0], atol=1e-5)
    hx = torch.as_tensor(x[:5])
    c = coords.encode(hx)
    assert torch.equal(coords.write(hx, c, c), hx)


def test_variance_explained_of_the_ics_is_their_pcs_share():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(500, D)) @ rng.normal(size=(D, D))
    basis = Basis.fit(x, BasisConfig(n_ics=3), {})
    got = variance_explained(LinearCoordinates(basis, "ica"), x, basis.mean, basis.std)
    assert got == pytest.approx(basis.explained_variance_ratio[:3].sum(), rel=1e-9)
