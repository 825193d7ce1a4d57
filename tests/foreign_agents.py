"""Other code bases' agents, re-implemented slowly and obviously, and saved as each one saves them.

Each ``*Ref`` class holds random weights under the *source's* tensor names and layout, saves
them exactly as the source does, and runs the source's forward pass one step at a time with
plain tensor algebra: convolutions as sums over kernel offsets, pooling as maxima over shifted
slices, recurrences and fast weights as loops over rows and heads (no ``F.conv2d``, no
``nn.GRU``, nothing of proclab's). ``proclab import`` of the saved file must then agree with it
(``tests/models/importers``).

Interface of every reference: ``initial_state(B)`` and
``step(obs_nchw_uint8, state, first, prev_reward) -> (logits (B, A), value (B,), state)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import msgpack
import numpy as np
import torch

# -- primitives (NCHW, float64 for an exact reference) ------------------------------------------


def conv(x, w, b, stride=1, pad=(0, 0)):
    """``sum over (ky, kx) of w[:, :, ky, kx] . x[shifted]``; ``pad`` = (before, after) on H and W."""
    lo, hi = pad
    x = torch.nn.functional.pad(x, (lo, hi, lo, hi))
    k = w.shape[-1]
    out_h = (x.shape[2] - k) // stride + 1
    out_w = (x.shape[3] - k) // stride + 1
    out = b.view(1, -1, 1, 1).expand(x.shape[0], -1, out_h, out_w).clone()
    for ky in range(k):
        for kx in range(k):
            patch = x[
                :, :, ky : ky + stride * (out_h - 1) + 1 : stride, kx : kx + stride * (out_w - 1) + 1 : stride
            ]
            out = out + torch.einsum("nchw,oc->nohw", patch, w[:, :, ky, kx])
    return out


def max_pool(x, pad):
    """3x3 windows, stride 2; ``pad`` = (before, after) filled with -inf."""
    lo, hi = pad
    x = torch.nn.functional.pad(x, (lo, hi, lo, hi), value=-math.inf)
    out_h = (x.shape[2] - 3) // 2 + 1
    out_w = (x.shape[3] - 3) // 2 + 1
    best = None
    for ky in range(3):
        for kx in range(3):
            s = x[:, :, ky : ky + 2 * (out_h - 1) + 1 : 2, kx : kx + 2 * (out_w - 1) + 1 : 2]
            best = s if best is None else torch.maximum(best, s)
    return best


def relu(x):
    return torch.clamp(x, min=0)


def sigmoid(x):
    return 1 / (1 + torch.exp(-x))


def softmax(z):
    e = torch.exp(z - z.max())
    return e / e.sum()


def linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    """``nn.GRU``'s documented equations, gates r, z, n."""
    gi, gh = linear(x, w_ih, b_ih), linear(h, w_hh, b_hh)
    H = h.shape[-1]
    r = sigmoid(gi[:, :H] + gh[:, :H])
    z = sigmoid(gi[:, H : 2 * H] + gh[:, H : 2 * H])
    n = torch.tanh(gi[:, 2 * H :] + r * gh[:, 2 * H :])
    return (1 - z) * n + z * h


def lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """``nn.LSTM``'s documented equations, gates i, f, g, o."""
    g = linear(x, w_ih, b_ih) + linear(h, w_hh, b_hh)
    H = h.shape[-1]
    i, f, gg, o = (
        sigmoid(g[:, :H]),
        sigmoid(g[:, H : 2 * H]),
        torch.tanh(g[:, 2 * H : 3 * H]),
        sigmoid(g[:, 3 * H :]),
    )
    c = f * c + i * gg
    return o * torch.tanh(c), c


def delta_phi(z):
    """Delta Net's feature map: (elu(z) + 1) normalised to sum one (1e-5 in the denominator)."""
    e = torch.where(z > 0, z + 1, torch.exp(z))
    return e / (e.sum() + 1e-5)


def log_softmax(z):
    return z - torch.logsumexp(z, -1, keepdim=True)


class _Weights:
    """Random weights under source names; float64 copies for the reference's arithmetic."""

    def __init__(self, seed: int):
        self.gen = torch.Generator().manual_seed(seed)
        self.sd: dict[str, torch.Tensor] = {}

    def add(self, name: str, *shape: int, std: float | None = None) -> None:
        fan_in = math.prod(shape[1:]) if len(shape) > 1 else shape[0]
        std = std if std is not None else 1 / math.sqrt(fan_in)
        self.sd[name] = (torch.randn(*shape, generator=self.gen) * std).float()

    def linear(self, name: str, out: int, inp: int, std: float | None = None) -> None:
        self.add(f"{name}.weight", out, inp, std=std)
        self.add(f"{name}.bias", out, std=0.1)

    def conv(self, name: str, out: int, inp: int, k: int) -> None:
        self.add(f"{name}.weight", out, inp, k, k, std=1 / math.sqrt(inp * k * k))
        self.add(f"{name}.bias", out, std=0.1)

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.sd[name].double()


def impala_forward(x, w: _Weights, conv_name, res_name, fc_name, blocks: int, pool_pad=(1, 1)):
    """conv3x3 -> max-pool -> 2 x (x + conv(relu(conv(relu(x))))) per block; ReLU, flatten, FC, ReLU."""
    for i in range(blocks):
        x = conv(x, w[f"{conv_name(i)}.weight"], w[f"{conv_name(i)}.bias"], pad=(1, 1))
        x = max_pool(x, pool_pad)
        for j in range(2):
            a, b = res_name(i, j, 0), res_name(i, j, 1)
            h = conv(relu(x), w[f"{a}.weight"], w[f"{a}.bias"], pad=(1, 1))
            x = x + conv(relu(h), w[f"{b}.weight"], w[f"{b}.bias"], pad=(1, 1))
    x = relu(x).flatten(1)
    return relu(linear(x, w[f"{fc_name}.weight"], w[f"{fc_name}.bias"]))


def add_impala(w: _Weights, conv_name, res_name, fc_name, widths, fc: int) -> None:
    in_ch, side = 3, 64
    for i, width in enumerate(widths):
        w.conv(conv_name(i), width, in_ch, 3)
        for j in range(2):
            for k in range(2):
                w.conv(res_name(i, j, k), width, width, 3)
        in_ch, side = width, (side + 1) // 2
    w.linear(fc_name, fc, in_ch * side * side)


# -- train-procgen-pytorch ----------------------------------------------------------------------


class TrainProcgenRef:
    """``CategoricalPolicy(ImpalaModel | NatureModel, GRU)`` of train-procgen-pytorch."""

    def __init__(self, widths=(8, 16, 16), fc=32, gru=True, nature=False, seed=0):
        self.w, self.widths, self.fc, self.gru, self.nature = _Weights(seed), widths, fc, gru, nature
        if nature:
            in_ch = 3
            for layer, (width, k) in zip((0, 2, 4), zip(widths, (8, 4, 3), strict=True), strict=True):
                self.w.conv(f"embedder.layers.{layer}", width, in_ch, k)
                in_ch = width
            self.w.linear("embedder.layers.7", fc, in_ch * 4 * 4)
        else:
            add_impala(self.w, self._conv, self._res, "embedder.fc", widths, fc)
        if gru:
            for part in ("ih", "hh"):
                self.w.add(f"gru.gru.weight_{part}_l0", 3 * fc, fc)
                self.w.add(f"gru.gru.bias_{part}_l0", 3 * fc, std=0.1)
            self.w.add("init_hx", fc, std=0.1)
        self.w.linear("fc_policy", 15, fc, std=0.5)
        self.w.linear("fc_value", 1, fc)

    @staticmethod
    def _conv(i):
        return f"embedder.block{i + 1}.conv"

    @staticmethod
    def _res(i, j, k):
        return f"embedder.block{i + 1}.res{j + 1}.conv{k + 1}"

    def save(self, path: Path, key: str = "model_state_dict") -> Path:
        payload = {key: self.w.sd, "optimizer_state_dict": {"state": {}, "param_groups": []}}
        torch.save(self.w.sd if key is None else payload, path)
        return path

    def initial_state(self, B):
        return torch.zeros(B, self.fc, dtype=torch.float64)

    def step(self, obs, state, first, prev_reward=None):
        w, x = self.w, obs.double() / 255
        if self.nature:
            for layer, s in zip((0, 2, 4), (4, 2, 1), strict=True):
                x = relu(
                    conv(
                        x, w[f"embedder.layers.{layer}.weight"], w[f"embedder.layers.{layer}.bias"], stride=s
                    )
                )
            x = relu(linear(x.flatten(1), w["embedder.layers.7.weight"], w["embedder.layers.7.bias"]))
        else:
            x = impala_forward(x, w, self._conv, self._res, "embedder.fc", len(self.widths))
        if self.gru:
            h = state * (1 - first.double()).unsqueeze(1)  # hxs * masks
            state = gru_cell(
                x, h, *(w[f"gru.gru.{n}_l0"] for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
            )
            x = state
        return (
            linear(x, w["fc_policy.weight"], w["fc_policy.bias"]),
            linear(x, w["fc_value.weight"], w["fc_value.bias"])[:, 0],
            state,
        )


# -- CleanRL ppo_procgen / PufferLib ProcgenResnet -------------------------------------------------


class CleanRLRef:
    """CleanRL's ``Agent`` (``critic``) or PufferLib's ``ProcgenResnet`` (``value``), optionally inside
    PufferLib's ``LSTMWrapper`` (prefix ``policy.``, ``recurrent`` LSTM). Observations NHWC."""

    def __init__(self, widths=(8, 16, 16), fc=32, value="critic", lstm=0, seed=0):
        self.w, self.widths, self.value, self.lstm = _Weights(seed), widths, value, lstm
        self.p = "policy." if lstm else ""
        add_impala(self.w, self._conv, self._res, f"{self.p}network.5", widths, fc)
        if lstm:
            for part, inp in (("ih", fc), ("hh", lstm)):
                self.w.add(f"recurrent.weight_{part}_l0", 4 * lstm, inp)
                self.w.add(f"recurrent.bias_{part}_l0", 4 * lstm, std=0.1)
        out = lstm or fc
        self.w.linear(f"{self.p}actor", 15, out, std=0.5)
        self.w.linear(f"{self.p}{value}", 1, out)

    def _conv(self, i):
        return f"{self.p}network.{i}.conv"

    def _res(self, i, j, k):
        return f"{self.p}network.{i}.res_block{j}.conv{k}"

    def save(self, path: Path) -> Path:
        torch.save(self.w.sd, path)
        return path

    def initial_state(self, B):
        return (torch.zeros(B, self.lstm, dtype=torch.float64),) * 2 if self.lstm else ()

    def step(self, obs, state, first, prev_reward=None):
        nhwc = obs.permute(0, 2, 3, 1)  # what the source receives
        x = nhwc.permute(0, 3, 1, 2).double() / 255.0
        x = impala_forward(x, self.w, self._conv, self._res, f"{self.p}network.5", len(self.widths))
        if self.lstm:
            keep = (1 - first.double()).unsqueeze(1)
            h, c = lstm_cell(x, state[0] * keep, state[1] * keep, *self._lstm())
            state, x = (h, c), h
        p = self.p
        logits = linear(x, self.w[f"{p}actor.weight"], self.w[f"{p}actor.bias"])
        return (
            logits,
            linear(x, self.w[f"{p}{self.value}.weight"], self.w[f"{p}{self.value}.bias"])[:, 0],
            state,
        )

    def _lstm(self):
        return tuple(self.w[f"recurrent.{n}_l0"] for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))


# -- torchbeast / modern-srwm -----------------------------------------------------------------------

TORCHBEAST_FLAG = {
    "none": None,
    "lstm": "use_lstm",
    "delta": "use_delta",
    "srwm": "use_sr",
    "fake_sr": "use_psr",
    "no_carry_sr": "use_no_carry_sr",
    "sr_delta": "use_smfwp",
}


class TorchbeastRef:
    """modern-srwm's ``Net`` / ``DeltaNetModel`` / ``SRModel`` / ``PseudoSRModel`` /
    ``NoCarryOverSRModel`` / ``SMFWPModel``, one step at a time, per spec §2.3 (row vectors)."""

    def __init__(self, core="none", widths=(8, 16, 16), fc=32, hidden=16, heads=2, layers=2, ff=24, seed=0):
        self.w, self.core, self.widths, self.fc = _Weights(seed), core, widths, fc
        self.hidden, self.heads, self.d, self.layers, self.ff = hidden, heads, hidden // heads, layers, ff
        add_impala(self.w, lambda i: f"feat_convs.{i}.0", self._res, "fc", widths, fc)
        out = fc + 1
        if core == "lstm":
            for part, inp in (("ih", fc + 1), ("hh", hidden)):
                self.w.add(f"core.weight_{part}_l0", 4 * hidden, inp)
                self.w.add(f"core.bias_{part}_l0", 4 * hidden, std=0.1)
            out = hidden
        elif core != "none":
            self._add_transformer()
            out = hidden
        self.w.linear("policy", 15, out, std=0.5)
        self.w.linear("baseline", 1, out)

    @staticmethod
    def _res(i, j, k):
        return f"resnet{j + 1}.{i}.{2 * k + 1}"

    def _add_transformer(self):
        H, d, w = self.heads, self.d, self.w
        w.linear("core.input_proj", self.hidden, self.fc + 1)
        for i in range(self.layers):
            m = f"core.fwm_layers.{i}"
            w.add(f"{m}.out_linear.weight", self.hidden, H * d)
            w.add(f"{m}.layer_norm.weight", self.hidden, std=0.2)
            w.add(f"{m}.layer_norm.bias", self.hidden, std=0.1)
            if self.core == "delta":
                w.add(f"{m}.slow_net.weight", H * (3 * d + 1), self.hidden)
            elif self.core == "fake_sr":
                w.add(f"{m}.W_y", H, d, d, std=1 / math.sqrt(d))
            else:
                y_cols = 3 * d + 1 if self.core == "sr_delta" else d
                for name, cols in (("W_y", y_cols), ("W_q", d), ("W_k", d), ("w_b", 4)):
                    w.add(f"{m}.{name}", 1, H, d, cols, std=1 / math.sqrt(d))
            f = f"core.ff_layers.{i}"
            w.add(f"{f}.layer_norm.weight", self.hidden, std=0.2)
            w.add(f"{f}.layer_norm.bias", self.hidden, std=0.1)
            w.linear(f"{f}.ff_layers.0", self.ff, self.hidden)
            w.linear(f"{f}.ff_layers.3", self.hidden, self.ff)
        for i in range(self.layers):  # LayerNorm weights of 1 + noise read better
            for part in ("fwm_layers", "ff_layers"):
                w.sd[f"core.{part}.{i}.layer_norm.weight"] += 1

    def save(self, path: Path, flags: bool = True, step: int = 123456) -> Path:
        flag = TORCHBEAST_FLAG[self.core]
        payload = {
            "model_state_dict": self.w.sd,
            "optimizer_state_dict": {"state": {}, "param_groups": [{"lr": 6e-4}]},
            "scheduler_state_dict": {"last_epoch": 3},
            "stats": {"step": step, "episode_returns": tuple(np.array([1.5, 2.0], np.float32))},
            "best_valid_return": 0.0,
        }
        if flags:
            payload["flags"] = {
                "env": "procgen:procgen-bigfish-v0",
                "distribution_mode": "easy",
                "num_levels": 200,
                "start_level": 0,
                "reward_clipping": "abs_one",
                "num_head": self.heads,
                "dim_head": self.d,
                **{f: f == flag for f in TORCHBEAST_FLAG.values() if f},
            }
        torch.save(payload, path)
        return path

    def initial_state(self, B):
        H, d = self.heads, self.d
        z = lambda *s: torch.zeros(B, *s, dtype=torch.float64)  # noqa: E731
        if self.core == "lstm":
            return [z(self.hidden), z(self.hidden)]
        if self.core == "delta":
            return [{"F": z(H, d, d)} for _ in range(self.layers)]
        if self.core in ("srwm", "sr_delta"):
            y_cols = 3 * d + 1 if self.core == "sr_delta" else d
            shapes = {"W_y": (H, d, y_cols), "W_q": (H, d, d), "W_k": (H, d, d), "w_b": (H, d, 4)}
            if self.core == "sr_delta":
                shapes["F"] = (H, d, d)
            return [{n: z(*s) for n, s in shapes.items()} for _ in range(self.layers)]
        return []

    def step(self, obs, state, first, prev_reward):
        w = self.w
        x = impala_forward(
            obs.double() / 255.0, w, lambda i: f"feat_convs.{i}.0", self._res, "fc", len(self.widths)
        )
        x = torch.cat([x, prev_reward.double().clamp(-1, 1).unsqueeze(1)], 1)
        keep = 1 - first.double()
        if self.core == "lstm":
            h, c = (s * keep.unsqueeze(1) for s in state)
            h, c = lstm_cell(
                x, h, c, *(w[f"core.{n}_l0"] for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
            )
            state, x = [h, c], h
        elif self.core != "none":
            state = [{k: v * keep.view(-1, *[1] * (v.dim() - 1)) for k, v in s.items()} for s in state]
            x = linear(x, w["core.input_proj.weight"], w["core.input_proj.bias"])
            new_state = []
            for i in range(self.layers):
                x, s = self._memory(i, x, state[i] if state else {})
                new_state.append(s)
                f = f"core.ff_layers.{i}"
                inner = relu(
                    linear(
                        layer_norm(x, w[f"{f}.layer_norm.weight"], w[f"{f}.layer_norm.bias"]),
                        w[f"{f}.ff_layers.0.weight"],
                        w[f"{f}.ff_layers.0.bias"],
                    )
                )
                x = x + linear(inner, w[f"{f}.ff_layers.3.weight"], w[f"{f}.ff_layers.3.bias"])
            state = new_state if state else []
        return (
            linear(x, w["policy.weight"], w["policy.bias"]),
            linear(x, w["baseline.weight"], w["baseline.bias"])[:, 0],
            state,
        )

    def _memory(self, i, x, state):
        """One memory sub-layer for every row: loops over rows and heads."""
        m, w, H, d = f"core.fwm_layers.{i}", self.w, self.heads, self.d
        B = x.shape[0]
        reads = torch.zeros(B, H, d, dtype=torch.float64)
        new = {k: v.clone() for k, v in state.items()}
        if self.core == "delta":
            p = linear(
                layer_norm(x, w[f"{m}.layer_norm.weight"], w[f"{m}.layer_norm.bias"]),
                w[f"{m}.slow_net.weight"],
            )
        for b in range(B):
            for h in range(H):
                if self.core == "delta":
                    q, k, v, beta = self._qkvb(p[b, h * (3 * d + 1) : (h + 1) * (3 * d + 1)], elu_phi=True)
                    F = state["F"][b, h]
                    F = F + torch.outer(k, beta * (v - k @ F))
                    new["F"][b, h], reads[b, h] = F, q @ F
                elif self.core == "fake_sr":
                    reads[b, h] = x[b, h * d : (h + 1) * d] @ w[f"{m}.W_y"][h]
                else:
                    reads[b, h] = self._srwm_head(m, b, h, softmax(x[b, h * d : (h + 1) * d]), state, new)
        return x + linear(reads.reshape(B, H * d), w[f"{m}.out_linear.weight"]), new

    def _qkvb(self, p, elu_phi):
        d = self.d
        q, k, v, b = p[:d], p[d : 2 * d], p[2 * d : 3 * d], p[3 * d :]
        if elu_phi:
            return delta_phi(q), delta_phi(k), v, sigmoid(b)
        return softmax(q), softmax(k), v, sigmoid(b)

    def _srwm_head(self, m, b, h, xh, state, new):
        w = self.w
        carry = self.core != "no_carry_sr"
        W = {n: w[f"{m}.{n}"][0, h] + (state[n][b, h] if carry else 0) for n in ("W_y", "W_q", "W_k", "w_b")}
        y = xh @ W["W_y"]
        q, k, beta = softmax(xh @ W["W_q"]), softmax(xh @ W["W_k"]), sigmoid(xh @ W["w_b"])
        if carry:
            for idx, n in enumerate(("W_y", "W_q", "W_k", "w_b")):
                new[n][b, h] = W[n] + torch.outer(k, beta[idx] * (q @ W[n] - k @ W[n])) - w[f"{m}.{n}"][0, h]
        if self.core != "sr_delta":
            return y
        qf, kf, vf, bf = self._qkvb(y, elu_phi=False)
        F = state["F"][b, h]
        F = F + torch.outer(kf, bf * (vf - kf @ F))
        new["F"][b, h] = F
        return qf @ F


# -- Cleanba (Flax, NHWC) ------------------------------------------------------------------------------


def conv_nhwc(x, kernel, bias):
    """Flax ``nn.Conv`` 3x3 SAME: ``x`` (N, H, W, C), ``kernel`` (kh, kw, in, out)."""
    n, hgt, wid, _ = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.broadcast_to(bias.astype(np.float64), (n, hgt, wid, kernel.shape[-1])).copy()
    for ky in range(3):
        for kx in range(3):
            out += np.einsum("nhwc,co->nhwo", xp[:, ky : ky + hgt, kx : kx + wid], kernel[ky, kx])
    return out


def max_pool_same(x):
    """Flax ``nn.max_pool(window 3, strides 2, padding SAME)`` on NHWC: XLA splits the padding
    ``total // 2`` before and the rest after."""
    size = x.shape[1]
    out = -(-size // 2)
    total = max((out - 1) * 2 + 3 - size, 0)
    lo, hi = total // 2, total - total // 2
    xp = np.pad(x, ((0, 0), (lo, hi), (lo, hi), (0, 0)), constant_values=-np.inf)
    best = None
    for ky in range(3):
        for kx in range(3):
            s = xp[:, ky : ky + 2 * (out - 1) + 1 : 2, kx : kx + 2 * (out - 1) + 1 : 2]
            best = s if best is None else np.maximum(best, s)
    return best


class CleanbaRef:
    """Cleanba's ``Network``, ``Actor``, ``Critic`` on NCHW uint8 observations from envpool."""

    def __init__(self, widths=(8, 16, 16), fc=32, env_id="StarpilotEasy-v0", seed=0):
        rng = np.random.default_rng(seed)
        self.widths, self.env_id = widths, env_id
        dense = lambda i, o, s=None: {  # noqa: E731
            "kernel": (rng.standard_normal((i, o)) * (s or 1 / math.sqrt(i))).astype(np.float32),
            "bias": (rng.standard_normal(o) * 0.1).astype(np.float32),
        }
        convk = lambda i, o: {  # noqa: E731
            "kernel": (rng.standard_normal((3, 3, i, o)) / math.sqrt(9 * i)).astype(np.float32),
            "bias": (rng.standard_normal(o) * 0.1).astype(np.float32),
        }
        net, in_ch, side = {}, 3, 64
        for i, c in enumerate(widths):
            net[f"ConvSequence_{i}"] = {
                "Conv_0": convk(in_ch, c),
                **{f"ResidualBlock_{j}": {"Conv_0": convk(c, c), "Conv_1": convk(c, c)} for j in range(2)},
            }
            in_ch, side = c, -(-side // 2)
        net["Dense_0"] = dense(in_ch * side * side, fc)
        self.params = [
            {"params": net},
            {"params": {"Dense_0": dense(fc, 15, 0.5)}},
            {"params": {"Dense_0": dense(fc, 1)}},
        ]

    def save(self, path: Path) -> Path:
        args = {"env_id": self.env_id, "total_timesteps": 25_000_000, "seed": 1, "actor_device_ids": {"0": 0}}
        tree = {"0": args, "1": {str(i): p for i, p in enumerate(self.params)}}
        path.write_bytes(msgpack.packb(tree, default=_flax_ext, use_bin_type=True))
        return path

    def initial_state(self, B):
        return ()

    def step(self, obs, state, first, prev_reward=None):
        net = self.params[0]["params"]
        x = np.transpose(obs.numpy(), (0, 2, 3, 1)).astype(np.float64) / 255.0
        for i in range(len(self.widths)):
            seq = net[f"ConvSequence_{i}"]
            x = max_pool_same(conv_nhwc(x, seq["Conv_0"]["kernel"], seq["Conv_0"]["bias"]))
            for j in range(2):
                blk = seq[f"ResidualBlock_{j}"]
                h = conv_nhwc(np.maximum(x, 0), blk["Conv_0"]["kernel"], blk["Conv_0"]["bias"])
                x = x + conv_nhwc(np.maximum(h, 0), blk["Conv_1"]["kernel"], blk["Conv_1"]["bias"])
        x = np.maximum(x, 0).reshape(x.shape[0], -1)
        x = np.maximum(x @ net["Dense_0"]["kernel"] + net["Dense_0"]["bias"], 0)
        actor, critic = self.params[1]["params"]["Dense_0"], self.params[2]["params"]["Dense_0"]
        logits = x @ actor["kernel"] + actor["bias"]
        value = (x @ critic["kernel"] + critic["bias"])[:, 0]
        return torch.from_numpy(logits), torch.from_numpy(value), state


def _flax_ext(obj):
    """Flax's msgpack encoding of an array: extension 1, payload ``[shape, dtype name, bytes]``."""
    if isinstance(obj, np.ndarray):
        payload = msgpack.packb([list(obj.shape), obj.dtype.name, obj.tobytes("C")], use_bin_type=True)
        return msgpack.ExtType(1, payload)
    raise TypeError(f"cannot pack {type(obj)}")


# -- every variant the import tests cover ----------------------------------------------------

# name -> (reference factory, file name to save under, expected format)
VARIANTS: dict[str, tuple[Callable[[], object], str, str]] = {
    "train-procgen-gru": (lambda: TrainProcgenRef(gru=True), "model_4096.pth", "train-procgen"),
    "train-procgen-ff": (
        lambda: TrainProcgenRef(gru=False, widths=(16, 32, 32), fc=24),
        "model_8.pth",
        "train-procgen",
    ),
    "train-procgen-nature": (lambda: TrainProcgenRef(gru=True, nature=True), "model_16.pth", "train-procgen"),
    "cleanrl": (lambda: CleanRLRef(value="critic"), "ppo_procgen.cleanrl_model", "cleanrl"),
    "pufferlib": (lambda: CleanRLRef(value="value", widths=(4, 8, 8)), "puffer.pt", "cleanrl"),
    "pufferlib-lstm": (lambda: CleanRLRef(value="value", lstm=12), "puffer_lstm.pt", "cleanrl"),
    **{
        f"torchbeast-{core}": (lambda core=core: TorchbeastRef(core=core), "model.tar", "torchbeast")
        for core in ("none", "lstm", "delta", "srwm", "fake_sr", "no_carry_sr", "sr_delta")
    },
    "cleanba": (lambda: CleanbaRef(), "cleanba_ppo_envpool_procgen.cleanrl_model", "cleanba"),
}


def game_of(ref) -> str:
    return "starpilot" if isinstance(ref, CleanbaRef) else "bigfish"
