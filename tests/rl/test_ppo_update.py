"""PPO's update against slow references written from the seeds' descriptions: summed chunk gradients,
advantage normalisation per minibatch or per rollout, learning-rate annealing, the KL early stop and
the seed's replay resets (interpreting_rl_behavior.md section 2; anchors.md A1)."""

import copy

import numpy as np
import pytest
import torch

from proclab.rl.config import PPOConfig
from proclab.rl.ppo import PPOLearner
from proclab.run.runtime import make_runtime
from support import collected


@pytest.fixture(scope="module")
def ff_rollout():
    """A feed-forward agent and a rollout of 4 envs x 8 steps (collected once for the module)."""
    agent, ro, _ = collected("none", make_runtime("cpu", "fp32"), num_envs=4, num_steps=8)
    return agent, ro


@pytest.fixture(scope="module")
def gru_rollout():
    """A GRU agent and 4 envs x 48 coinrun steps in which episodes end."""
    agent, ro, _ = collected("gru", make_runtime("cpu", "fp32"), num_envs=4, num_steps=48, game="coinrun")
    assert ro.dones[:-1].any(), "no episode ended inside the rollout: the tests would not cover resets"
    return agent, ro


def learner_for(rollout, **ppo):
    """A fresh copy of the agent and a learner for it (the fixture's agent stays untouched)."""
    agent = copy.deepcopy(rollout[0])
    cfg = PPOConfig(num_steps=rollout[1].num_steps, **ppo)
    return agent, rollout[1], PPOLearner(agent, cfg, make_runtime("cpu", "fp32"), total_updates=10)


def gae_reference(ro, gamma, lam):
    """GAE from its recursion, one env and one step at a time."""
    T, N = ro.rewards.shape
    adv = np.zeros((T, N))
    for n in range(N):
        last = 0.0
        for t in reversed(range(T)):
            nonterminal = 1.0 - float(ro.dones[t, n])
            next_v = float(ro.next_value[n]) if t == T - 1 else float(ro.values[t + 1, n])
            delta = float(ro.rewards[t, n]) + gamma * next_v * nonterminal - float(ro.values[t, n])
            last = delta + gamma * lam * nonterminal * last
            adv[t, n] = last
    return adv


def zscore(x):
    x = np.asarray(x, dtype=np.float64)
    return (x - x.mean()) / (x.std(ddof=1) + 1e-8)


def sample_loss(agent, ro, t, n, adv, ret, cfg):
    """The clipped PPO loss of one sample, through the agent (a feed-forward one: no state)."""
    out, _ = agent.step(ro.obs[t, n][None], {}, torch.ones(1, dtype=torch.bool))
    logp = torch.log_softmax(out.logits[0].float(), -1)
    ratio = torch.exp(logp[ro.actions[t, n]] - ro.logprobs[t, n])
    a = float(adv[t, n])
    pg = torch.maximum(-a * ratio, -a * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef))
    v, old_v, r = out.value[0].float(), ro.values[t, n], float(ret[t, n])
    v_clip = old_v + (v - old_v).clamp(-cfg.clip_coef, cfg.clip_coef)
    v_loss = 0.5 * torch.maximum((v - r) ** 2, (v_clip - r) ** 2)
    entropy = -(logp.exp() * logp).sum()
    return pg + cfg.vf_coef * v_loss - cfg.ent_coef * entropy


def record_steps(learner):
    """Wrap the learner's optimiser step and minibatch step: gradients, learning rates, minibatches."""
    log = {"grads": [], "lr": [], "adv_in": [], "adv_used": [], "kl": []}
    step, opt_step = learner._step, learner.optimizer.step

    def wrapped_step(mb):
        log["adv_in"].append(mb.advantages.clone())
        stats = step(mb)
        log["adv_used"].append(mb.advantages.clone())
        log["kl"].append(float(stats["losses/approx_kl"]))
        return stats

    def wrapped_opt_step(*a, **kw):
        log["grads"].append([p.grad.clone() for p in learner.agent.parameters()])
        log["lr"].append(learner.optimizer.param_groups[0]["lr"])
        return opt_step(*a, **kw)

    learner._step = wrapped_step
    learner.optimizer.step = wrapped_opt_step
    return log


@pytest.mark.parametrize("summed", [True, False])
def test_chunk_gradients_sum_or_average_as_the_reference(summed, ff_rollout):
    """interpreting-rl-behavior: loss.backward() per chunk of mini_batch_size samples, one step per
    minibatch, so the gradient is the sum of the chunks' mean-loss gradients."""
    agent, ro, learner = learner_for(
        ff_rollout,
        num_minibatches=1,
        update_epochs=1,
        chunk_size=8,
        sum_chunk_grads=summed,
        max_grad_norm=1e9,
    )
    reference_agent = copy.deepcopy(agent)
    log = record_steps(learner)
    learner.update(ro)
    cfg = learner.cfg
    raw = gae_reference(ro, cfg.gamma, cfg.gae_lambda)
    ret, adv = raw + ro.values.double().numpy(), zscore(raw)
    per_sample = [sample_loss(reference_agent, ro, t, n, adv, ret, cfg) for t in range(8) for n in range(4)]
    total = sum(per_sample) / (8 if summed else 32)  # 4 chunks of 8 summed, or the mean of all 32
    expected = torch.autograd.grad(total, list(reference_agent.parameters()))
    (grads,) = log["grads"]
    for g, e in zip(grads, expected, strict=True):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("scope", ["minibatch", "rollout"])
def test_advantage_normalisation_scopes(scope, gru_rollout):
    _, ro, learner = learner_for(gru_rollout, num_minibatches=2, update_epochs=1, norm_adv_scope=scope)
    log = record_steps(learner)
    learner.update(ro)
    raw = gae_reference(ro, learner.cfg.gamma, learner.cfg.gae_lambda)
    used = [a.double().numpy() for a in log["adv_used"]]
    if scope == "minibatch":  # each minibatch z-scored on its own
        for before, after in zip(log["adv_in"], used, strict=True):
            np.testing.assert_allclose(after, zscore(before.double().numpy()), atol=1e-5)
        np.testing.assert_allclose(
            np.sort(np.concatenate([a.ravel() for a in log["adv_in"]])), np.sort(raw.ravel()), atol=1e-4
        )
    else:  # z-scored once over the rollout; minibatches use those values unchanged
        for before, after in zip(log["adv_in"], used, strict=True):
            np.testing.assert_array_equal(before.numpy(), after)
        np.testing.assert_allclose(
            np.sort(np.concatenate([a.ravel() for a in used])), np.sort(zscore(raw).ravel()), atol=1e-4
        )
        assert any(abs(a.mean()) > 1e-3 for a in used)  # so per-minibatch statistics would differ


@pytest.mark.parametrize("anneal", [True, False])
def test_learning_rate_decays_linearly_to_zero(anneal, ff_rollout):
    """The seed: after update k, lr = lr0 * (1 - k * batch / total_steps); here total = 4 batches."""
    _, ro, learner = learner_for(
        ff_rollout, num_minibatches=2, update_epochs=1, anneal_lr=anneal, learning_rate=1e-3
    )
    learner.total_updates = 4
    log = record_steps(learner)
    for _ in range(4):
        learner.update(ro)
    batch, total = 4 * 8, 4 * 4 * 8
    expected = [1e-3 * (1 - k * batch / total) if anneal else 1e-3 for k in range(4) for _ in range(2)]
    assert log["lr"] == pytest.approx(expected)


def test_kl_early_stop_ends_the_update_after_the_first_epoch_over_the_target(ff_rollout):
    """CleanRL's rule: after each epoch, stop if its last minibatch's approx KL exceeds target_kl."""

    def run(target):
        _, ro, learner = learner_for(ff_rollout, num_minibatches=2, update_epochs=4, target_kl=target)
        log = record_steps(learner)
        torch.manual_seed(5)
        learner.update(ro)
        return log["kl"]

    free = run(None)
    assert len(free) == 8
    epoch_ends = free[1::2]
    for target in (0.0, float(np.median(epoch_ends)), 1e9):
        stop = next((e for e, kl in enumerate(epoch_ends) if kl > target), len(epoch_ends) - 1)
        kls = run(target)
        assert len(kls) == 2 * (stop + 1), target
        assert kls == pytest.approx(free[: len(kls)])
    assert run(0.0) == pytest.approx(free[:2])  # the first epoch's last step has moved the policy


@pytest.mark.parametrize("mode", ["first", "done"])
def test_recurrent_replay_resets_where_the_mode_says(mode, gru_rollout):
    """first: reset before step t where obs_t starts an episode (as acting did); done: where the
    episode ends after step t, interpreting-rl-behavior's training pass (mask = 1 - done_t)."""
    agent, ro, learner = learner_for(gru_rollout, num_minibatches=1, replay_reset=mode)
    resets = ro.dones if mode == "done" else ro.firsts
    (mb,) = learner._minibatches(ro, ro.rewards, ro.rewards, *ro.rewards.shape)
    with torch.no_grad():
        logits, _ = learner._forward(mb)
        for j in range(mb.actions.shape[1]):
            (n,) = [i for i in range(4) if torch.equal(ro.actions[:, i], mb.actions[:, j])]
            h = ro.initial_state["core.0.h"][n : n + 1]
            for t in range(ro.num_steps):
                if resets[t, n]:
                    h = torch.zeros_like(h)
                out, state = agent.step(ro.obs[t, n][None], {"core.0.h": h}, torch.zeros(1, dtype=torch.bool))
                h = state["core.0.h"]
                torch.testing.assert_close(logits[t, j], out.logits[0], atol=1e-5, rtol=1e-5)


def test_seed_replay_does_not_reproduce_the_acting_policy(gru_rollout):
    """The seed's off-by-one: replayed log-probs differ from the actor's after an episode end."""
    _, ro, learner = learner_for(gru_rollout, num_minibatches=1, replay_reset="done")
    (mb,) = learner._minibatches(ro, ro.rewards, ro.rewards, *ro.rewards.shape)
    with torch.no_grad():
        logits, _ = learner._forward(mb)
    logp = torch.log_softmax(logits, -1).gather(-1, mb.actions[..., None])[..., 0]
    assert not torch.allclose(logp, mb.logprobs, atol=1e-4)
