"""The world model against the seed: its RSSM cell, encoder block and loss table, checked with slow
references written from the spec's equations (interpreting_rl_behavior.md section 4); models saved
before the seed forms existed still load as they were built."""

import json
import math
import shutil

import pytest
import torch
import torch.nn.functional as F

from proclab.errors import ProclabError
from proclab.io.checkpoint import find_checkpoint
from proclab.io.run_dirs import read_metrics, read_run_config
from proclab.run.runtime import make_runtime
from proclab.worldmodel.batch import WindowBatch
from proclab.worldmodel.checkpoint import load_world_model
from proclab.worldmodel.config import LossWeights, WorldModelConfig, saved_train_config, wm_size
from proclab.worldmodel.layers import LayerNormGRUCell, NormGRUCell, ResBlockDown, SeedResBlockDown
from proclab.worldmodel.losses import world_model_loss
from proclab.worldmodel.model import RSSM, Start, Trajectory, WorldModel


def layer_norm_reference(v, weight, bias, eps):
    """LayerNorm of one vector, from its definition (biased variance)."""
    mean = sum(v) / len(v)
    var = sum((x - mean) ** 2 for x in v) / len(v)
    return [
        (x - mean) / math.sqrt(var + eps) * float(w) + float(b)
        for x, w, b in zip(v, weight, bias, strict=True)
    ]


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def norm_gru_reference(cell: NormGRUCell, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """pydreamer's NormGRUCell, one row and one unit at a time."""
    W_i, W_h = cell.weight_ih.weight.tolist(), cell.weight_hh.weight.tolist()
    n = h.shape[1]
    out = []
    for xb, hb in zip(x.tolist(), h.tolist(), strict=True):
        gi = [sum(w * v for w, v in zip(row, xb, strict=True)) for row in W_i]
        gh = [sum(w * v for w, v in zip(row, hb, strict=True)) for row in W_h]

        def ln(v, norm):
            return layer_norm_reference(v, norm.weight.tolist(), norm.bias.tolist(), 1e-3)

        reset = [sigmoid(v) for v in ln([gi[j] + gh[j] for j in range(n)], cell.ln_reset)]
        update = [sigmoid(v) for v in ln([gi[n + j] + gh[n + j] for j in range(n)], cell.ln_update)]
        cand = [
            math.tanh(v)
            for v in ln([gi[2 * n + j] + reset[j] * gh[2 * n + j] for j in range(n)], cell.ln_newval)
        ]
        out.append([update[j] * cand[j] + (1 - update[j]) * hb[j] for j in range(n)])
    return torch.tensor(out)


def test_seed_cell_matches_the_seed_equations():
    torch.manual_seed(0)
    cell = NormGRUCell(4, 5)
    with torch.no_grad():  # non-trivial norm affines, so that each LayerNorm's parameters matter
        for norm in (cell.ln_reset, cell.ln_update, cell.ln_newval):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    x, h = torch.randn(3, 4), torch.randn(3, 5)
    torch.testing.assert_close(cell(x, h), norm_gru_reference(cell, x, h), atol=1e-5, rtol=1e-5)
    assert (
        sum(p.numel() for p in cell.parameters()) == 4 * 15 + 5 * 15 + 3 * 2 * 5
    )  # no biases in the linears


def test_seed_size_builds_the_seed_forms_and_small_sizes_keep_theirs():
    paper = wm_size("paper")
    assert (paper.model.rssm_cell, paper.model.encoder_block, paper.loss.bottleneck_diagonal) == (
        "norm_gru",
        "seed",
        True,
    )
    assert WorldModelConfig() == paper.model  # the dataclass defaults are the seed's model
    for name in ("small", "tiny"):
        size = wm_size(name)
        assert (size.model.rssm_cell, size.model.encoder_block, size.loss.bottleneck_diagonal) == (
            "dreamer_gru",
            "preact",
            False,
        )
    small = WorldModelConfig(
        **{**wm_size("tiny").model.__dict__, "rssm_cell": "norm_gru", "encoder_block": "seed"}
    )
    wm = WorldModel(small, 15, {"core.0.h": (16,)})
    assert isinstance(wm.rssm.cell, NormGRUCell) and all(isinstance(b, SeedResBlockDown) for b in wm.encoder)
    old = WorldModel(wm_size("tiny").model, 15, {"core.0.h": (16,)})
    assert isinstance(old.rssm.cell, LayerNormGRUCell) and all(
        isinstance(b, ResBlockDown) for b in old.encoder
    )


def test_seed_block_matches_the_seed_layout():
    """conv1(LN1(x)), conv2(LeakyReLU_0.01(LN2(h))), pool; shortcut: pool, then the 1x1 conv."""
    torch.manual_seed(1)
    block = SeedResBlockDown(3, 4, 8)
    with torch.no_grad():
        for norm in (block.norm0, block.norm1):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 3, 8, 8)

    def ln(v, norm):  # over (C, H, W) per sample, with one affine weight per position
        flat = v.reshape(v.shape[0], -1)
        z = (flat - flat.mean(1, keepdim=True)) / torch.sqrt(flat.var(1, unbiased=False, keepdim=True) + 1e-5)
        return z.view_as(v) * norm.weight + norm.bias

    h = F.conv2d(ln(x, block.norm0), block.conv0.weight, block.conv0.bias, padding=1)
    h = ln(h, block.norm1)
    h = torch.where(h > 0, h, 0.01 * h)
    h = F.conv2d(h, block.conv1.weight, block.conv1.bias, padding=1)
    pooled_x = x.unfold(2, 2, 2).unfold(3, 2, 2).amax((-1, -2))
    pooled_h = h.unfold(2, 2, 2).unfold(3, 2, 2).amax((-1, -2))
    expected = pooled_h + F.conv2d(pooled_x, block.shortcut.weight, block.shortcut.bias)
    torch.testing.assert_close(block(x), expected, atol=1e-5, rtol=1e-5)
    assert block.norm0.weight.shape == (3, 8, 8)


def test_cell_choice_changes_the_rssm_step():
    torch.manual_seed(2)
    cfg = wm_size("tiny").model
    seed_cfg = WorldModelConfig(**{**cfg.__dict__, "rssm_cell": "norm_gru"})
    assert isinstance(RSSM(seed_cfg, 15, 8).cell, NormGRUCell)
    assert isinstance(RSSM(cfg, 15, 8).cell, LayerNormGRUCell)
    with pytest.raises(ProclabError, match="rssm cell"):
        WorldModelConfig(rssm_cell="lstm")


# -- the loss table --------------------------------------------------------------------------------
S, B, D, A, V, C = 3, 2, 4, 15, 3, 5  # steps, batch, agent state, actions, categoricals, classes


def _fake(seed: int):
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    frames = torch.randint(0, 256, (S, B, 3, 64, 64), generator=g, dtype=torch.uint8)
    start = Start(
        bottleneck=F.normalize(r(B, 6), dim=-1),
        env_h=r(B, 7),
        env_z=r(B, V * C),
        agent_state=r(B, D),
        action_logits=r(B, A),
        prev_action=r(B, A),
    )
    traj = Trajectory(
        start=start,
        env_h=r(S, B, 7),
        env_z=r(S, B, V * C),
        prior_logits=r(S, B, V, C),
        post_logits=r(S, B, V, C),
        image=torch.rand(S, B, 3, 64, 64, generator=g),
        frame=torch.zeros(S, B, 3, 64, 64),
        reward=r(S, B),
        done_logit=r(S, B),
        agent_state=r(S, B, D),
        logits=r(S, B, A),
        value=r(S, B),
        action=F.one_hot(torch.randint(0, A, (S, B), generator=g), A).float(),
    )
    masks = torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    batch = WindowBatch(
        init_frames=frames[:2],
        frames=frames,
        prev_actions=torch.randint(0, A, (S, B), generator=g),
        reward=r(S, B),
        done=(torch.rand(S, B, generator=g) > 0.5).float(),
        agent_h0=r(B, D),
        agent_states=r(S, B, D),
        actions=torch.randint(0, A, (S, B), generator=g),
        frame_mask=masks,
        prev_mask=torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0]]),
        state_mask=torch.tensor([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0]]),
    )
    return start, traj, batch


def loss_table_reference(start, traj, batch, w: LossWeights):
    """Spec section 4.2, one sequence and one step at a time."""
    per_term = {k: 0.0 for k in ("image", "reward", "done", "agent_state", "kl", "env_update")}
    for b in range(B):
        h_prev = start.env_h[b]
        for k in range(S):
            fm, pm, sm = (
                float(batch.frame_mask[k, b]),
                float(batch.prev_mask[k, b]),
                float(batch.state_mask[k, b]),
            )
            x = batch.frames[k, b].double() / 255
            per_term["image"] += fm * 0.5 * float(((traj.image[k, b].double() - x) ** 2).sum())
            per_term["reward"] += pm * 0.5 * float(traj.reward[k, b] - batch.reward[k, b]) ** 2
            p, d = sigmoid(float(traj.done_logit[k, b])), float(batch.done[k, b])
            per_term["done"] += pm * -(d * math.log(p) + (1 - d) * math.log(1 - p))
            per_term["agent_state"] += (
                sm * 0.5 * float(((traj.agent_state[k, b] - batch.agent_states[k, b]) ** 2).sum())
            )
            kl = 0.0
            for v in range(V):
                post = torch.softmax(traj.post_logits[k, b, v].double(), 0)
                prior = torch.softmax(traj.prior_logits[k, b, v].double(), 0)
                kl += float((post * (post.log() - prior.log())).sum())
            per_term["kl"] += fm * kl
            per_term["env_update"] += fm * float(torch.linalg.norm(traj.env_h[k, b] - h_prev))
            h_prev = traj.env_h[k, b]
    per_term = {k: v / B for k, v in per_term.items()}  # mean over sequences of the sums over steps
    vecs = start.bottleneck.double()
    total = sum(
        math.exp(-float(((vecs[i] - vecs[j]) ** 2).sum()))
        if i != j
        else (math.e if w.bottleneck_diagonal else 0.0)
        for i in range(B)
        for j in range(B)
    )
    parts = {
        "bottleneck": math.log(total),
        "init_state": sum(float(((start.agent_state[b] - batch.agent_h0[b]) ** 2).sum()) for b in range(B))
        / B,
        "init_action": sum(
            -float(torch.log_softmax(start.action_logits[b].double(), 0)[batch.prev_actions[0, b]])
            for b in range(B)
        )
        / B,
    }
    total_loss = sum(getattr(w, k) * v for k, v in {**per_term, **parts}.items())
    return total_loss, {**per_term, **parts}


@pytest.mark.parametrize("diagonal", [True, False])
def test_loss_table_matches_the_spec_term_by_term(diagonal):
    start, traj, batch = _fake(0)
    w = LossWeights(
        image=0.7,
        reward=1.3,
        done=0.9,
        agent_state=1.1,
        kl=12.0,
        env_update=0.5,
        bottleneck=100.0,
        init_state=0.6,
        init_action=1.7,
        bottleneck_diagonal=diagonal,
    )
    total, metrics = world_model_loss(start, traj, batch, w)
    expected_total, expected_terms = loss_table_reference(start, traj, batch, w)
    for k, v in expected_terms.items():  # logged unweighted
        assert float(metrics[f"losses/{k}"]) == pytest.approx(v, rel=1e-4, abs=1e-5), k
    assert float(total) == pytest.approx(expected_total, rel=1e-4)
    assert float(metrics["losses/total"]) == pytest.approx(expected_total, rel=1e-4)


def test_masked_rows_do_not_count():
    start, traj, batch = _fake(1)
    w = LossWeights()
    base, _ = world_model_loss(start, traj, batch, w)
    traj.image[2] += 5.0  # step 2 is padding in both sequences (frame_mask 0)
    traj.agent_state[1, 0] += 5.0  # state_mask 0 there (after a terminal)
    traj.reward[2, 1] += 5.0  # prev_mask 0
    changed, _ = world_model_loss(start, traj, batch, w)
    assert float(changed) == pytest.approx(float(base), rel=1e-6)


# -- models saved before the seed forms existed ------------------------------------------------------
def test_world_models_saved_before_the_seed_forms_load_as_built(trained_run, tmp_path):
    ckpt = find_checkpoint(trained_run)
    old = tmp_path / ckpt.name
    shutil.copytree(ckpt, old)
    meta = json.loads((old / "meta.json").read_text())
    for name in ("rssm_cell", "encoder_block"):  # what a checkpoint written before these fields holds
        del meta["world_model"][name]
    (old / "meta.json").write_text(json.dumps(meta))
    rt = make_runtime("cpu", "fp32")
    wm, _, _ = load_world_model(old, rt)
    assert (wm.config.rssm_cell, wm.config.encoder_block) == ("dreamer_gru", "preact")
    assert isinstance(wm.rssm.cell, LayerNormGRUCell)
    new, _, _ = load_world_model(ckpt, rt)
    for (k, a), b in zip(wm.state_dict().items(), new.state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    saved = read_run_config(trained_run)  # a pre-change run's config resumes with its old forms
    del saved["model"]["rssm_cell"], saved["loss"]["bottleneck_diagonal"]
    resumed = saved_train_config(saved)
    assert resumed.model.rssm_cell == "dreamer_gru" and resumed.loss.bottleneck_diagonal is False


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_seed_forms_train_and_reload(make_config, precision):
    """The tiny size with the seed's cell, blocks and uniformity loss: trains (channels-last, bf16 too),
    its losses are finite, and its checkpoint rebuilds the same model."""
    from proclab.worldmodel.trainer import train_world_model

    base = make_config()
    model = WorldModelConfig(**{**base.model.__dict__, "rssm_cell": "norm_gru", "encoder_block": "seed"})
    loss = LossWeights(**{**base.loss.__dict__, "bottleneck_diagonal": True})
    run = train_world_model(
        base.data, base, model=model, loss=loss, total_updates=2, precision=precision, progress=False
    ).run_dir
    assert all(math.isfinite(v) for v in read_metrics(run)["losses/total"])
    wm, _, _ = load_world_model(run, make_runtime("cpu", "fp32"))
    assert isinstance(wm.rssm.cell, NormGRUCell) and isinstance(wm.encoder[0], SeedResBlockDown)
