"""Grouped acting (graphs, two overlapped halves of the envs) against a plain step-by-step loop, on CPU.

On CPU an :class:`ActingStep` runs its computation eagerly (no CUDA graph), so these tests check the
collector's logic: groups, the worker-thread env steps, host buffers, reward normalisation once
per whole step, the carried state from one rollout to the next. The reference below is written
independently: the whole batch at once, numpy's searchsorted for the inverse CDF.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from proclab.envs import EnvConfig, ProcgenVecEnv, RewardNormalizer
from proclab.envs.halves import HalvedVecEnv
from proclab.errors import ProclabError
from proclab.models import AgentConfig, build_agent
from proclab.rl.acting_graph import sample_from_uniform
from proclab.rl.config import PPOConfig, TrainConfig
from proclab.rl.overlap import GroupedActor
from proclab.rl.rollout import Rollout
from proclab.run.runtime import make_runtime
from support import TINY_AGENT

ENV = EnvConfig(game=("starpilot",), num_envs=6, split="all")


def make_env(acting: str):
    vec = HalvedVecEnv(ENV, seed=3) if acting == "overlap" else ProcgenVecEnv(ENV, seed=3)
    return RewardNormalizer(vec, gamma=0.99)


def make_agent(core: str):
    torch.manual_seed(0)
    return build_agent(AgentConfig(core=core, rnn_size=16, prev_reward=core == "gru", **TINY_AGENT))


def reference_rollouts(env, agent, steps: int, rollouts: int) -> list[dict]:
    """The obvious loop: whole batch, one env step after another, actions by numpy's searchsorted."""
    obs, _ = env.reset()
    n = env.num_envs
    first, prev, state = np.ones(n, bool), np.zeros(n, np.float32), agent.initial_state(n)
    out = []
    for _ in range(rollouts):
        u = torch.rand(steps, n)
        ro = {
            k: []
            for k in ("obs", "firsts", "prev_rewards", "actions", "logprobs", "values", "rewards", "dones")
        }
        ro["returns"] = []
        for t in range(steps):
            with torch.no_grad():
                o, state = agent.step(
                    torch.from_numpy(obs), state, torch.from_numpy(first), torch.from_numpy(prev)
                )
            p = torch.softmax(o.logits.double(), -1).numpy()
            cdf = np.cumsum(p, axis=1)
            actions = np.array(
                [np.searchsorted(cdf[i], u[t, i].item() * cdf[i, -1], side="right") for i in range(n)]
            )
            ro["obs"].append(obs.copy())
            ro["firsts"].append(first.copy())
            ro["prev_rewards"].append(prev.copy())
            ro["actions"].append(actions)
            ro["logprobs"].append(np.log(p[np.arange(n), actions]))
            ro["values"].append(o.value.numpy())
            obs, reward, term, trunc, info = env.step(actions)
            done = term | trunc
            first, prev = done, np.where(done, 0.0, info["raw_reward"]).astype(np.float32)
            ro["rewards"].append(reward)
            ro["dones"].append(done)
            ro["returns"].append(info["episode"]["return"])
        out.append(
            {k: np.stack(v) for k, v in ro.items()} | {"state": {k: v.clone() for k, v in state.items()}}
        )
    return out


@pytest.mark.parametrize("acting", ["graph", "overlap"])
@pytest.mark.parametrize("core", ["none", "gru"])
def test_grouped_acting_fills_the_rollouts_of_a_step_by_step_loop(acting, core):
    """Same seed: the same observations, actions, rewards (normalised), dones and episode returns
    over two consecutive rollouts; log-probabilities, values and carried states equal within float
    rounding (a half is another batch size)."""
    rt = make_runtime("cpu", "fp32")
    steps, rollouts = 40, 2
    env, agent = make_env(acting), make_agent(core)
    torch.manual_seed(5)
    expected = reference_rollouts(env, agent, steps, rollouts)

    env, agent = make_env(acting), make_agent(core)
    torch.manual_seed(5)
    actor = GroupedActor(env, agent, rt)
    assert len(actor.groups) == (2 if acting == "overlap" else 1)
    for exp in expected:
        returns = []
        ro = Rollout.allocate(steps, ENV.num_envs, rt.device)
        actor.collect(ro, on_info=lambda info, returns=returns: returns.append(info["episode"]["return"]))
        for key in ("obs", "firsts", "actions", "dones"):
            np.testing.assert_array_equal(getattr(ro, key).numpy(), exp[key], err_msg=key)
        for key in ("prev_rewards", "rewards", "logprobs", "values"):
            np.testing.assert_allclose(getattr(ro, key).numpy(), exp[key], rtol=1e-5, atol=1e-5, err_msg=key)
        np.testing.assert_array_equal(np.stack(returns), exp["returns"])
        for key, value in exp["state"].items():
            torch.testing.assert_close(actor.state[key], value, atol=1e-5, rtol=1e-5)
    assert exp["dones"].any(), "no episode ended: the test would not see resets"
    assert np.abs(exp["rewards"]).max() > 0, "no reward: the test would not see normalisation"


def test_sampling_from_uniforms_follows_the_policy():
    """Inverse-CDF actions are distributed as softmax(logits) (chi-square), never take a
    zero-probability action, and their log-probabilities are the policy's."""
    logits = torch.tensor([[0.0, 1.0, -float("inf"), 2.0, -1.0]])
    n = 200_000
    action, logprob = sample_from_uniform(
        logits.expand(n, -1), torch.rand(n, generator=torch.Generator().manual_seed(1))
    )
    p = torch.softmax(logits[0].double(), -1).numpy()
    counts = np.bincount(action.numpy(), minlength=5)
    assert counts[2] == 0
    keep = p > 0
    chi2 = (((counts[keep] - n * p[keep]) ** 2) / (n * p[keep])).sum()
    assert chi2 < 18.5, chi2  # 3 degrees of freedom: p < 0.0005 under the null
    np.testing.assert_allclose(logprob.numpy(), np.log(p[action.numpy()]), rtol=1e-5)
    edges = sample_from_uniform(logits.expand(2, -1), torch.tensor([0.0, 1.0 - 2**-24]))[0]
    assert edges.tolist() == [0, 4]


@pytest.mark.parametrize("games", [("starpilot",), ("starpilot", "coinrun")])
def test_halved_env_state_is_a_single_envs_state(games):
    """A halved env's saved state restores into one env of the same envs and back: same frames."""
    cfg = EnvConfig(game=games, num_envs=4 * len(games))
    halved = HalvedVecEnv(cfg, seed=1)
    halved.reset()
    rng = np.random.default_rng(0)
    for _ in range(30):
        halved.step(rng.integers(0, 15, cfg.num_envs))
    single = ProcgenVecEnv(cfg, seed=9)
    obs, _ = single.set_state(halved.get_state())
    np.testing.assert_array_equal(obs, halved.observe())
    np.testing.assert_array_equal(single.game_index, halved.game_index)
    actions = rng.integers(0, 15, cfg.num_envs)
    a, b = halved.step(actions), single.step(actions)
    for x, y in zip(a[:4], b[:4], strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a[4]["episode"]["return"], b[4]["episode"]["return"])
    back = HalvedVecEnv(cfg, seed=7)
    obs, _ = back.set_state(single.get_state())
    np.testing.assert_array_equal(obs, single.observe())


def test_acting_modes_are_checked():
    with pytest.raises(ProclabError, match="acting"):
        TrainConfig(ppo=PPOConfig(acting="fast")).validate()
    with pytest.raises(ProclabError, match="halves"):
        TrainConfig(
            env=EnvConfig(num_envs=6, game=("coinrun", "starpilot")), ppo=PPOConfig(acting="overlap")
        ).validate()
    with pytest.raises(ProclabError, match="halved"):
        HalvedVecEnv(EnvConfig(num_envs=5))
