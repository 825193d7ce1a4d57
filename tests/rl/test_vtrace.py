"""V-trace and the IMPALA loss against slow, obvious references written from the equations."""

import numpy as np
import pytest
import torch

from proclab.models import AgentOutput
from proclab.rl.config import ImpalaConfig
from proclab.rl.gae import gae
from proclab.rl.impala import ImpalaLearner, Unrolls, impala_loss
from proclab.rl.vtrace import vtrace
from proclab.run.runtime import make_runtime


def reference_vtrace(log_rhos, rewards, dones, values, bootstrap, gamma, rho_bar, c_bar, pg_rho_bar):
    """Espeholt et al. (2018), eq. (1), one (s, b) at a time:

    v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i c_i) rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t))
    A_s = min(pg_rho_bar, pi/mu) (r_s + gamma_s v_{s+1} - V(x_s)),   with V(x_T) = v_T = bootstrap
    and gamma_t = 0 where the episode ended after step t.
    """
    T, B = rewards.shape
    vs = np.zeros((T, B))
    adv = np.zeros((T, B))
    for b in range(B):

        def V(t, b=b):
            return bootstrap[b] if t == T else values[t, b]

        def discount(t, b=b):
            return 0.0 if dones[t, b] else gamma

        for s in range(T):
            total = V(s)
            for t in range(s, T):
                trace = 1.0
                for i in range(s, t):
                    trace *= discount(i) * min(c_bar, np.exp(log_rhos[i, b]))
                rho_t = min(rho_bar, np.exp(log_rhos[t, b]))
                total += trace * rho_t * (rewards[t, b] + discount(t) * V(t + 1) - V(t))
            vs[s, b] = total
        for s in range(T):
            v_next = bootstrap[b] if s == T - 1 else vs[s + 1, b]
            adv[s, b] = min(pg_rho_bar, np.exp(log_rhos[s, b])) * (
                rewards[s, b] + discount(s) * v_next - V(s)
            )
    return vs, adv


def random_inputs(T=9, B=4, seed=0):
    rng = np.random.default_rng(seed)
    return dict(
        log_rhos=rng.normal(0, 1, (T, B)),  # pi/mu spread over both sides of every truncation level
        rewards=rng.normal(0, 1, (T, B)),
        dones=rng.random((T, B)) < 0.2,
        values=rng.normal(0, 1, (T, B)),
        bootstrap=rng.normal(0, 1, B),
    )


def run_vtrace(x, gamma, rho_bar, c_bar, pg_rho_bar):
    t = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    behaviour = t(np.zeros_like(x["log_rhos"]))
    discounts = gamma * (1.0 - t(x["dones"].astype(np.float32)))
    return vtrace(
        behaviour,
        t(x["log_rhos"]),
        t(x["rewards"]),
        discounts,
        t(x["values"]),
        t(x["bootstrap"]),
        rho_bar=rho_bar,
        c_bar=c_bar,
        pg_rho_bar=pg_rho_bar,
    )


@pytest.mark.parametrize(
    ("gamma", "rho_bar", "c_bar", "pg_rho_bar"),
    [(0.99, 1.0, 1.0, 1.0), (0.9, 1.5, 0.7, 1.2), (0.95, 0.5, 2.0, 0.3)],
)
def test_vtrace_matches_reference(gamma, rho_bar, c_bar, pg_rho_bar):
    x = random_inputs()
    rhos = np.exp(x["log_rhos"])
    for level in (rho_bar, c_bar, pg_rho_bar):  # the data exercises both sides of every clip
        assert (rhos > level).any() and (rhos < level).any()
    assert x["dones"].any() and not x["dones"].all()
    out = run_vtrace(x, gamma, rho_bar, c_bar, pg_rho_bar)
    vs, adv = reference_vtrace(**x, gamma=gamma, rho_bar=rho_bar, c_bar=c_bar, pg_rho_bar=pg_rho_bar)
    np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.pg_advantages.numpy(), adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.rhos.numpy(), rhos, rtol=1e-6)


def test_nothing_flows_across_a_done():
    """gamma_t = 0 at a done: targets before it ignore every later reward and the bootstrap value."""
    x = random_inputs(T=6, B=1)
    x["dones"][:] = False
    x["dones"][2, 0] = True
    base = run_vtrace(x, 0.99, 1.0, 1.0, 1.0)
    x["rewards"][3:] += 100.0
    x["bootstrap"] += 100.0
    changed = run_vtrace(x, 0.99, 1.0, 1.0, 1.0)
    torch.testing.assert_close(base.vs[:3], changed.vs[:3])
    torch.testing.assert_close(base.pg_advantages[:3], changed.pg_advantages[:3])
    assert (changed.vs[3:] > base.vs[3:] + 1).all()


def test_one_step_bootstraps_from_the_last_value():
    out = vtrace(
        torch.tensor([[0.0]]),
        torch.tensor([[np.log(0.5)]]),
        torch.tensor([[2.0]]),
        torch.tensor([[0.9]]),
        torch.tensor([[1.0]]),
        torch.tensor([3.0]),
    )
    # rho = 0.5: v_0 = V + rho (r + gamma V(x_1) - V) = 1 + 0.5 (2 + 2.7 - 1); A_0 = rho (r + gamma v_1 - V)
    assert out.vs.item() == pytest.approx(1 + 0.5 * 3.7)
    assert out.pg_advantages.item() == pytest.approx(0.5 * 3.7)


def test_on_policy_vtrace_is_the_lambda_one_return():
    x = random_inputs(T=12, B=3, seed=1)
    x["log_rhos"][:] = 0.0
    out = run_vtrace(x, 0.97, 1.0, 1.0, 1.0)
    t = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    adv, ret = gae(t(x["rewards"]), t(x["values"]), torch.tensor(x["dones"]), t(x["bootstrap"]), 0.97, 1.0)
    torch.testing.assert_close(out.vs, ret, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.pg_advantages, adv, rtol=1e-5, atol=1e-5)


# -- the loss ------------------------------------------------------------------------------------
def random_batch(T=7, B=3, A=15, seed=0):
    g = torch.Generator().manual_seed(seed)
    return Unrolls(
        obs=torch.zeros(T + 1, B, 3, 64, 64, dtype=torch.uint8),
        firsts=torch.zeros(T + 1, B, dtype=torch.bool),
        prev_rewards=torch.zeros(T + 1, B),
        actions=torch.randint(0, A, (T, B), generator=g),
        logprobs=-torch.rand(T, B, generator=g) * 4,
        rewards=torch.randn(T, B, generator=g) * 3,  # many outside [-1, 1]
        dones=torch.rand(T, B, generator=g) < 0.2,
        initial_state={},
        versions=torch.zeros(B, dtype=torch.int64),
    )


def test_loss_is_the_seeds_sum_with_constant_targets():
    cfg = ImpalaConfig(gamma=0.9)
    batch = random_batch()
    T, B = batch.actions.shape
    logits = torch.randn(T + 1, B, 15, requires_grad=True)
    values = torch.randn(T + 1, B, requires_grad=True)
    loss, stats = impala_loss(logits, values, batch, cfg)

    # reference: clamp(r, -1, 1); V-trace from eq. (1); losses as sums (spec 1.3)
    logp = torch.log_softmax(logits[:-1].detach().double(), -1)
    taken = logp.gather(-1, batch.actions.unsqueeze(-1)).squeeze(-1).numpy()
    vs, adv = reference_vtrace(
        taken - batch.logprobs.double().numpy(),
        batch.rewards.clamp(-1, 1).double().numpy(),
        batch.dones.numpy(),
        values[:-1].detach().double().numpy(),
        values[-1].detach().double().numpy(),
        0.9,
        1.0,
        1.0,
        1.0,
    )
    pg = -(taken * adv).sum()
    baseline = 0.5 * 0.5 * ((vs - values[:-1].detach().double().numpy()) ** 2).sum()
    entropy = 0.01 * (logp.exp() * logp).sum().item()
    assert loss.item() == pytest.approx(pg + baseline + entropy, rel=1e-4)
    assert stats["losses/policy_loss"].item() == pytest.approx(pg, rel=1e-4)

    loss.backward()
    # the targets are constants: the value gradient is -baseline_cost (v_s - V(x_s)), none on V(x_T)
    expected = -0.5 * (vs - values[:-1].detach().double().numpy())
    np.testing.assert_allclose(values.grad[:-1].numpy(), expected, rtol=1e-4, atol=1e-5)
    assert (values.grad[-1] == 0).all()


def test_mean_reduction_divides_every_part_by_t_times_b():
    batch = random_batch(seed=1)
    T, B = batch.actions.shape
    logits, values = torch.randn(T + 1, B, 15), torch.randn(T + 1, B)
    total, s = impala_loss(logits, values, batch, ImpalaConfig(reduction="sum"))
    mean, m = impala_loss(logits, values, batch, ImpalaConfig(reduction="mean"))
    assert mean.item() == pytest.approx(total.item() / (T * B), rel=1e-5)
    for k in ("losses/policy_loss", "losses/value_loss", "losses/entropy_loss"):
        assert m[k].item() == pytest.approx(s[k].item() / (T * B), rel=1e-5)


def test_reward_clipping_is_a_clamp():
    batch = random_batch(seed=2)
    T, B = batch.actions.shape
    logits, values = torch.randn(T + 1, B, 15), torch.randn(T + 1, B)
    clipped, _ = impala_loss(logits, values, batch, ImpalaConfig())
    batch.rewards = batch.rewards.clamp(-1, 1)
    raw, _ = impala_loss(logits, values, batch, ImpalaConfig(reward_clipping="none"))
    assert clipped.item() == pytest.approx(raw.item(), rel=1e-6)


class Bandit(torch.nn.Module):
    """An "agent" whose logits and value are free parameters (the same at every step)."""

    def __init__(self):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.zeros(15))
        self.value = torch.nn.Parameter(torch.zeros(()))

    def unroll(self, obs, state, firsts, prev_rewards):
        T1, B = firsts.shape
        return AgentOutput(self.logits.expand(T1, B, 15), self.value.expand(T1, B)), {}


def test_learner_uses_rmsprop_and_decays_the_rate_to_zero():
    batch = random_batch(T=5, B=2)
    cfg = ImpalaConfig(total_steps=4 * 5 * 2, unroll_length=5, batch_size=2, max_grad_norm=1e-3)
    learner = ImpalaLearner(Bandit(), cfg, make_runtime("cpu", "fp32"))
    opt = learner.optimizer
    assert isinstance(opt, torch.optim.RMSprop)
    assert (opt.defaults["lr"], opt.defaults["alpha"], opt.defaults["eps"], opt.defaults["momentum"]) == (
        6e-4,
        0.99,
        0.01,
        0,
    )
    rates = [learner.update(batch)["charts/learning_rate"] for _ in range(4)]
    np.testing.assert_allclose(rates, [6e-4, 4.5e-4, 3e-4, 1.5e-4], rtol=1e-6)
    assert opt.param_groups[0]["lr"] == 0.0
    grad = torch.cat([p.grad.reshape(-1) for p in learner.agent.parameters()])
    assert grad.norm().item() == pytest.approx(1e-3, rel=1e-4)  # clipped to max_grad_norm


def test_updates_favour_rewarded_actions_off_policy():
    """A one-step bandit, acted by a stale uniform policy: action 3 pays 1. The learner's policy
    must come to prefer it and its value must rise towards the expected reward."""
    torch.manual_seed(0)
    agent = Bandit()
    learner = ImpalaLearner(
        agent, ImpalaConfig(learning_rate=0.05, total_steps=10**9), make_runtime("cpu", "fp32")
    )
    T, B = 10, 8
    for _ in range(40):
        batch = random_batch(T, B)
        batch.actions = torch.randint(0, 15, (T, B))
        batch.logprobs = torch.full((T, B), -np.log(15.0))  # behaviour: uniform, not the learner's policy
        batch.rewards = (batch.actions == 3).float()
        batch.dones[:] = True
        learner.update(batch)
    probs = torch.softmax(agent.logits.detach(), -1)
    assert probs.argmax() == 3 and probs[3] > 0.3
    assert 0.02 < agent.value.item() < 1.0
