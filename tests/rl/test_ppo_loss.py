"""The PPO objective against a per-sample reference written from the paper's equations."""

import math

import numpy as np
import pytest
import torch

from proclab.rl.config import PPOConfig
from proclab.rl.ppo import Batch, ppo_loss


def reference(logits, values, actions, old_logp, old_values, adv, returns, cfg):
    n = len(actions)
    pg = v = ent = 0.0
    for i in range(n):
        z = [float(x) for x in logits[i]]
        m = max(z)
        lse = m + math.log(sum(math.exp(x - m) for x in z))
        logp = [x - lse for x in z]
        ratio = math.exp(logp[actions[i]] - old_logp[i])
        clipped = min(max(ratio, 1 - cfg.clip_coef), 1 + cfg.clip_coef)
        pg += max(-adv[i] * ratio, -adv[i] * clipped) / n
        vu = (values[i] - returns[i]) ** 2
        if cfg.clip_vloss:
            vc = old_values[i] + min(max(values[i] - old_values[i], -cfg.clip_coef), cfg.clip_coef)
            vu = max(vu, (vc - returns[i]) ** 2)
        v += 0.5 * vu / n
        ent += -sum(math.exp(lp) * lp for lp in logp) / n
    return pg - cfg.ent_coef * ent + cfg.vf_coef * v, pg, v, ent


@pytest.mark.parametrize("clip_vloss", [True, False])
def test_ppo_loss_matches_reference(clip_vloss):
    rng = np.random.default_rng(1)
    n, a = 64, 15
    cfg = PPOConfig(clip_vloss=clip_vloss, clip_coef=0.1, ent_coef=0.02, vf_coef=0.7)
    logits = torch.tensor(rng.normal(size=(n, a)), dtype=torch.float32)
    values = torch.tensor(rng.normal(size=n), dtype=torch.float32)
    actions = torch.tensor(rng.integers(0, a, n))
    old_logp = torch.log_softmax(logits + 0.3 * torch.randn(n, a), -1).gather(1, actions[:, None]).squeeze(1)
    old_values = values + 0.3 * torch.randn(n)
    adv = torch.tensor(rng.normal(size=n), dtype=torch.float32)
    ret = torch.tensor(rng.normal(size=n), dtype=torch.float32)
    mb = Batch(
        obs=None,
        firsts=None,
        prev_rewards=None,
        actions=actions,
        logprobs=old_logp,
        values=old_values,
        advantages=adv,
        returns=ret,
    )
    loss, stats = ppo_loss(logits, values, mb, cfg)
    ref_loss, ref_pg, ref_v, ref_ent = reference(
        logits.numpy(),
        values.numpy(),
        actions.numpy(),
        old_logp.numpy(),
        old_values.numpy(),
        adv.numpy(),
        ret.numpy(),
        cfg,
    )
    assert float(loss) == pytest.approx(ref_loss, rel=1e-5, abs=1e-6)
    assert float(stats["losses/policy_loss"]) == pytest.approx(ref_pg, rel=1e-5, abs=1e-6)
    assert float(stats["losses/value_loss"]) == pytest.approx(ref_v, rel=1e-5, abs=1e-6)
    assert float(stats["losses/entropy"]) == pytest.approx(ref_ent, rel=1e-5, abs=1e-6)


def test_identical_policy_has_zero_kl_and_no_clipping():
    n = 32
    logits = torch.randn(n, 15)
    actions = torch.randint(0, 15, (n,))
    logp = torch.log_softmax(logits, -1).gather(1, actions[:, None]).squeeze(1)
    mb = Batch(None, None, None, actions, logp, torch.zeros(n), torch.randn(n), torch.zeros(n))
    _, stats = ppo_loss(logits, torch.zeros(n), mb, PPOConfig())
    assert abs(float(stats["losses/approx_kl"])) < 1e-7
    assert float(stats["losses/clipfrac"]) == 0.0
