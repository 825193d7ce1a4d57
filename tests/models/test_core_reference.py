"""Each core against a slow, obvious reference written here from the spec's equations (§2.3).

The references loop over rows, time steps and heads with plain vector algebra (no einsum, no
batching) and read the module's parameters. The core runs in float64 from a random incoming
state, with some rows reset mid-sequence, and must agree to ~1e-10. Row-vector convention:
a head's matrix ``W`` is ``d_in x d_out`` and is read as ``x @ W``.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from proclab.models.cores import CORES, build_core
from proclab.models.cores.recurrent import GRULayer, LSTMLayer

ALL_CORES = sorted(CORES)
SUB = ("W_y", "W_q", "W_k", "w_b")


# -- vector helpers (one row, one head) --------------------------------------------------------
def sigmoid(z):
    return 1 / (1 + torch.exp(-z))


def softmax(z):
    e = torch.exp(z - z.max())
    return e / e.sum()


def layer_norm(x, ln):
    mu = x.mean()
    var = ((x - mu) ** 2).mean()
    return (x - mu) / math.sqrt(var + ln.eps) * ln.weight + ln.bias


def linear(x, lin):
    y = lin.weight @ x
    return y if lin.bias is None else y + lin.bias


def phi(z):
    e = torch.where(z > 0, z + 1, torch.exp(z))  # elu(z) + 1
    return e / (e.sum() + 1e-5)


def feed_forward(x, ff):
    return x + linear(torch.relu(linear(layer_norm(x, ff.norm), ff.fc1)), ff.fc2)


def delta_update(F, q, k, v, beta):
    """F_t = F + k^T beta (v - k F); read q F_t."""
    F_new = F + torch.outer(k, beta * (v - k @ F))
    return q @ F_new, F_new


def srwm_head(layer, h, x_h, shifts):
    """One head of the SRWM: returns y and the new shifts of the four sub-matrices."""
    W = {Z: getattr(layer, Z)[h] + shifts[Z] for Z in SUB}
    y = x_h @ W["W_y"]
    q = softmax(x_h @ W["W_q"])
    k = softmax(x_h @ W["W_k"])
    beta = sigmoid(x_h @ W["w_b"])
    new = {Z: shifts[Z] + torch.outer(k, beta[i] * (q @ W[Z] - k @ W[Z])) for i, Z in enumerate(SUB)}
    return y, new


# -- one layer, one row, one step --------------------------------------------------------------
def ref_delta(layer, x, st):
    H, d = layer.heads, layer.head_dim
    p = layer.slow.weight @ layer_norm(x, layer.norm)
    reads, Fs = [], []
    for h in range(H):
        c = p[h * (3 * d + 1) : (h + 1) * (3 * d + 1)]
        read, F = delta_update(st["F"][h], phi(c[:d]), phi(c[d : 2 * d]), c[2 * d : 3 * d], sigmoid(c[3 * d]))
        reads.append(read)
        Fs.append(F)
    return x + layer.out_proj.weight @ torch.cat(reads), {"F": torch.stack(Fs)}


def ref_srwm(layer, x, st):
    H, d = layer.heads, layer.head_dim
    reads, new = [], {Z: [] for Z in SUB}
    for h in range(H):
        y, shifts = srwm_head(layer, h, softmax(x[h * d : (h + 1) * d]), {Z: st[Z][h] for Z in SUB})
        reads.append(y)
        for Z in SUB:
            new[Z].append(shifts[Z])
    return x + layer.out_proj.weight @ torch.cat(reads), {Z: torch.stack(v) for Z, v in new.items()}


def ref_sr_delta(layer, x, st):
    H, d = layer.heads, layer.head_dim
    reads, new = [], {Z: [] for Z in (*SUB, "F")}
    for h in range(H):
        y, shifts = srwm_head(layer, h, softmax(x[h * d : (h + 1) * d]), {Z: st[Z][h] for Z in SUB})
        assert y.shape == (3 * d + 1,)
        q, k, v, b = softmax(y[:d]), softmax(y[d : 2 * d]), y[2 * d : 3 * d], sigmoid(y[3 * d])
        read, F = delta_update(st["F"][h], q, k, v, b)
        reads.append(read)
        for Z in SUB:
            new[Z].append(shifts[Z])
        new["F"].append(F)
    return x + layer.out_proj.weight @ torch.cat(reads), {Z: torch.stack(v) for Z, v in new.items()}


def ref_no_carry_sr(layer, x, st):
    H, d = layer.heads, layer.head_dim
    reads = [softmax(x[h * d : (h + 1) * d]) @ layer.W_y[h] for h in range(H)]
    return x + layer.out_proj.weight @ torch.cat(reads), {}


def ref_fake_sr(layer, x, st):
    H, d = layer.heads, layer.head_dim
    reads = [x[h * d : (h + 1) * d] @ layer.W_y[h] for h in range(H)]  # no softmax
    return x + layer.out_proj.weight @ torch.cat(reads), {}


def ref_lstm(layer, x, st):
    gates = layer.weight_ih @ x + layer.bias_ih + layer.weight_hh @ st["h"] + layer.bias_hh
    n = layer.size
    i, f, g, o = (gates[j * n : (j + 1) * n] for j in range(4))
    c = sigmoid(f) * st["c"] + sigmoid(i) * torch.tanh(g)
    h = sigmoid(o) * torch.tanh(c)
    return h, {"h": h, "c": c}


def ref_gru(layer, x, st):
    n, h = layer.size, st["h"]
    gi = layer.weight_ih @ x + layer.bias_ih
    gh = layer.weight_hh @ h + layer.bias_hh
    r = sigmoid(gi[:n] + gh[:n])
    z = sigmoid(gi[n : 2 * n] + gh[n : 2 * n])
    cand = torch.tanh(gi[2 * n :] + r * gh[2 * n :])
    h = (1 - z) * cand + z * h
    return h, {"h": h}


MEMORY = {
    "delta": ref_delta,
    "srwm": ref_srwm,
    "sr_delta": ref_sr_delta,
    "no_carry_sr": ref_no_carry_sr,
    "fake_sr": ref_fake_sr,
    "lstm": ref_lstm,
    "gru": ref_gru,
}
TRANSFORMER = {"delta", "srwm", "sr_delta", "no_carry_sr", "fake_sr"}


def reference_core(name, core, x, state, firsts):
    """The whole core, row by row and step by step."""
    T, B = firsts.shape
    outs, finals = [], {k: [] for k in state}
    for b in range(B):
        st = {k: v[b] for k, v in state.items()}
        row = []
        for t in range(T):
            if firsts[t, b]:
                st = {k: torch.zeros_like(v) for k, v in st.items()}  # reset to the initial state
            h = x[t, b]
            if name in TRANSFORMER:
                h = linear(h, core.input_proj)
            new = {}
            for i, layer in enumerate(core.layers()):
                h, layer_state = MEMORY[name](layer, h, {k: st[f"{i}.{k}"] for k in layer.state_shapes})
                if name in TRANSFORMER:
                    h = feed_forward(h, layer.ff)
                new.update({f"{i}.{k}": v for k, v in layer_state.items()})
            st = new
            row.append(h)
        outs.append(torch.stack(row))
        for k in finals:
            finals[k].append(st[k])
    return torch.stack(outs, dim=1), {k: torch.stack(v) for k, v in finals.items()}


@pytest.mark.parametrize("name", ALL_CORES)
@pytest.mark.parametrize("T", [1, 3])
def test_core_matches_slow_reference(name, T, tiny_config):
    config = tiny_config(name, rnn_layers=2)
    torch.manual_seed(3)
    core = build_core(config, in_dim=10).double()
    B = 3
    g = torch.Generator().manual_seed(4)
    x = torch.randn(T, B, 10, generator=g, dtype=torch.float64)
    state = {
        k: 0.3 * torch.randn(B, *s, generator=g, dtype=torch.float64) for k, s in core.state_shapes().items()
    }
    firsts = torch.zeros(T, B, dtype=torch.bool)
    firsts[0, 1] = True  # a reset before the first step
    if T > 1:
        firsts[T - 1, 2] = True  # and one mid-sequence
    with torch.no_grad():
        out, new = core(x, state, firsts, detach=False)
        ref_out, ref_new = reference_core(name, core, x, state, firsts)
    assert out.shape == ref_out.shape
    torch.testing.assert_close(out, ref_out, rtol=1e-10, atol=1e-10)
    assert new.keys() == ref_new.keys() == state.keys()
    for k in new:
        torch.testing.assert_close(new[k], ref_new[k], rtol=1e-10, atol=1e-10)
    if state:  # the update really moved the state (a zero update would pass trivially otherwise)
        assert any(not torch.allclose(new[k], state[k]) for k in new)


@pytest.mark.parametrize(("layer_cls", "cell_cls"), [(LSTMLayer, nn.LSTMCell), (GRULayer, nn.GRUCell)])
def test_gated_layers_match_torch_cells(layer_cls, cell_cls):
    """Same parameter names, gate order and results as nn.LSTMCell / nn.GRUCell."""
    torch.manual_seed(5)
    layer = layer_cls(7, 9)
    cell = cell_cls(7, 9)
    cell.load_state_dict(layer.state_dict())
    T, B = 4, 3
    x = torch.randn(T, B, 7)
    h = torch.randn(B, 9)
    state = {"h": h, "c": torch.randn(B, 9)} if layer_cls is LSTMLayer else {"h": h}
    with torch.no_grad():
        out, _ = layer(x, state, torch.zeros(T, B, dtype=torch.bool), detach=False)
        hx = (state["h"], state["c"]) if layer_cls is LSTMLayer else state["h"]
        for t in range(T):
            hx = cell(x[t], hx)
            torch.testing.assert_close(out[t], hx[0] if isinstance(hx, tuple) else hx)
