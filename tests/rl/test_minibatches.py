"""Minibatching: whole sequences for agents with memory, replay from the stored state, chunking."""

import dataclasses

import pytest
import torch

from proclab.rl.gae import gae
from proclab.run.layout import Layout
from proclab.run.runtime import make_runtime
from support import collected


@pytest.mark.parametrize(("core", "prev_reward"), [("none", False), ("gru", False), ("lstm", True)])
def test_replay_reproduces_acting_log_probs(core, prev_reward, fp32):
    """Before any update, the learner's forward pass on each minibatch gives back exactly the
    log-probabilities and values the actor saw: states, first flags and rewards line up."""
    _, ro, learner = collected(core, fp32, prev_reward=prev_reward, num_minibatches=3)
    adv, ret = gae(ro.rewards, ro.values, ro.dones, ro.next_value, 0.99, 0.95)
    seen = 0
    for mb in learner._minibatches(ro, adv, ret, *ro.rewards.shape):
        with torch.no_grad():
            logits, values = learner._forward(mb)
        logp = torch.log_softmax(logits.float(), -1).gather(-1, mb.actions.unsqueeze(-1)).squeeze(-1)
        torch.testing.assert_close(logp, mb.logprobs, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(values.float(), mb.values, atol=1e-5, rtol=1e-5)
        seen += mb.actions.numel()
    assert seen == ro.actions.numel()
    assert ro.firsts[1:].any() or ro.dones.any() or core == "none"  # episodes did end inside


def test_recurrent_minibatches_are_whole_env_sequences(fp32):
    _, ro, learner = collected("gru", fp32, num_envs=8, num_minibatches=4)
    adv, ret = gae(ro.rewards, ro.values, ro.dones, ro.next_value, 0.99, 0.95)
    covered = []
    for mb in learner._minibatches(ro, adv, ret, *ro.rewards.shape):
        assert mb.obs.shape[:2] == (ro.num_steps, 2)
        assert mb.initial_state["core.0.h"].shape[0] == 2
        # the sequence is env-contiguous in time: match it back to its env column
        for j in range(2):
            cols = [i for i in range(8) if torch.equal(ro.actions[:, i], mb.actions[:, j])]
            covered.extend(cols)
    assert sorted(covered) == list(range(8))


@pytest.mark.parametrize("core", ["none", "gru"])
def test_chunked_gradients_equal_whole_minibatch(core, fp32):
    """Averaged chunk gradients equal the gradient of the whole minibatch."""
    agent, ro, learner = collected(core, fp32, num_envs=8, num_minibatches=1)
    adv, ret = gae(ro.rewards, ro.values, ro.dones, ro.next_value, 0.99, 0.95)
    mb = next(learner._minibatches(ro, adv, ret, *ro.rewards.shape))
    grads = {}
    for chunk_size in (0, ro.num_steps * 2 if core == "gru" else 37):
        learner.cfg = learner.cfg.__class__(**{**learner.cfg.__dict__, "chunk_size": chunk_size})
        agent.zero_grad()
        total = 0.0
        for chunk, weight in learner._chunks(mb):
            logits, values = learner._forward(chunk)
            from proclab.rl.ppo import ppo_loss

            loss, _ = ppo_loss(logits, values, chunk, learner.cfg)
            (loss * weight).backward()
            total += weight
        assert total == pytest.approx(1.0)
        grads[chunk_size] = torch.cat([p.grad.flatten() for p in agent.parameters() if p.grad is not None])
    a, b = grads.values()
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_update_changes_weights_and_reports_metrics(fp32):
    agent, ro, learner = collected("gru", fp32, num_minibatches=2)
    before = [p.detach().clone() for p in agent.parameters()]
    metrics = learner.update(ro)
    assert any(not torch.equal(b, p) for b, p in zip(before, agent.parameters(), strict=True))
    for key in (
        "losses/policy_loss",
        "losses/value_loss",
        "losses/entropy",
        "losses/approx_kl",
        "losses/clipfrac",
        "losses/explained_variance",
        "charts/learning_rate",
    ):
        assert key in metrics


@pytest.mark.parametrize(("chunk_size", "sum_chunk_grads"), [(0, False), (37, False), (37, True)])
def test_compute_chunks_leave_the_step_unchanged(fp32, chunk_size, sum_chunk_grads):
    """The runtime's compute_chunk (speed only) gives the same gradients, gradient norm and
    statistics as whole chunks, whether chunk gradients are averaged or summed, and whether the
    pieces are computed one after another or side by side on two workers."""
    results = {}
    for compute_chunk, workers in ((0, 0), (16, 0), (16, 2), (64, 2)):
        rt = dataclasses.replace(fp32, compute_chunk=compute_chunk, workers=workers)
        agent, ro, learner = collected(
            "none", rt, num_envs=8, num_minibatches=1, chunk_size=chunk_size, sum_chunk_grads=sum_chunk_grads
        )
        adv, ret = gae(ro.rewards, ro.values, ro.dones, ro.next_value, 0.99, 0.95)
        mb = next(learner._minibatches(ro, adv, ret, *ro.rewards.shape))
        assert len(list(learner._chunks(mb, compute_chunk))) == {0: 1, 16: 12, 64: 3}[compute_chunk]
        stats = learner._step(mb)
        results[compute_chunk, workers] = (torch.cat([p.grad.flatten() for p in agent.parameters()]), stats)
    g_whole, s_whole = results[0, 0]
    for g_split, s_split in (results[16, 0], results[16, 2], results[64, 2]):
        torch.testing.assert_close(g_split, g_whole, atol=1e-6, rtol=1e-4)
        for key, value in s_whole.items():
            torch.testing.assert_close(s_split[key], value, atol=1e-5, rtol=1e-4)


def test_side_by_side_pieces_are_deterministic(fp32):
    """Pieces computed on workers are summed in piece order, so the same minibatch gives bit-equal
    gradients however the threads are scheduled (exact resume needs it)."""
    rt = dataclasses.replace(fp32, compute_chunk=16, workers=2)
    grads = []
    for _ in range(2):
        agent, ro, learner = collected("none", rt, num_envs=8, num_minibatches=2)
        torch.manual_seed(1)
        learner.update(ro)
        grads.append(torch.cat([p.grad.flatten() for p in agent.parameters()]))
        grads.append(torch.cat([p.detach().flatten() for p in agent.parameters()]))
    assert torch.equal(grads[0], grads[2])
    assert torch.equal(grads[1], grads[3])


@pytest.mark.parametrize("layout", ["whole:intra", "64:intra", "16:workers"])
def test_bf16_step_gives_the_fp32_gradient_in_every_layout(fp32, layout):
    """The bf16 path computes the fp32 step's gradient within bf16 rounding, whole or in pieces,
    on intra-op threads or on workers: same direction, same norm to a few percent."""
    bf16 = Layout.parse(layout).apply(make_runtime("cpu", "bf16"), threads=2)
    grads, norms = [], []
    for rt in (fp32, bf16):
        agent, ro, learner = collected("none", fp32, num_envs=8, num_minibatches=1)
        learner.rt = rt
        adv, ret = gae(ro.rewards, ro.values, ro.dones, ro.next_value, 0.99, 0.95)
        stats = learner._step(next(learner._minibatches(ro, adv, ret, *ro.rewards.shape)))
        grads.append(torch.cat([p.grad.flatten() for p in agent.parameters()]))
        norms.append(float(stats["losses/grad_norm"]))  # before clipping
    assert torch.nn.functional.cosine_similarity(grads[0], grads[1], dim=0) > 0.99
    assert norms[1] == pytest.approx(norms[0], rel=0.05)
