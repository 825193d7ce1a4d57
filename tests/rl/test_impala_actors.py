"""IMPALA actors: the seed's env/game layout, unroll and state hand-off to the learner, shared-memory pool."""

import copy
import itertools
from dataclasses import replace

import numpy as np
import pytest
import torch

from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.models import AgentConfig, build_agent
from proclab.rl.actors import ActorPool, ActorSpec, ActorWorker, flatten_weights, slot_games
from proclab.rl.config import ImpalaConfig, TrainConfig
from proclab.rl.impala import Unrolls
from support import TINY_AGENT

T = 16


def tiny_config(
    core="lstm", num_envs=4, num_actors=2, batch_size=2, prev_reward_reset=True, **train
) -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(game=("chaser", "bossfight"), num_envs=num_envs),  # frequent rewards, short episodes
        agent=AgentConfig(
            core=core,
            rnn_size=16,
            hidden=32,
            num_heads=2,
            head_dim=16,
            ff=32,
            prev_reward=True,
            prev_reward_reset=prev_reward_reset,
            **TINY_AGENT,
        ),
        impala=ImpalaConfig(
            num_actors=num_actors, unroll_length=T, batch_size=batch_size, total_steps=10_000
        ),
        algo="impala",
        val_num_envs=0,
        device="cpu",
        precision="fp32",
        **train,
    )


def test_env_j_plays_game_j_mod_g_however_envs_are_split():
    games = ("bigfish", "fruitbot", "maze", "leaper", "plunder", "starpilot")
    counts = dict.fromkeys(games, 0)
    for actor in range(12):  # 48 envs = 12 actors x 4 envs: every actor plays 4 of the 6 games
        index, env_games = slot_games(games, actor * 4, 4)
        env = ProcgenVecEnv(EnvConfig(game=env_games, num_envs=4))  # built lazily: no procgen yet
        for i in range(4):
            assert index[i] == (actor * 4 + i) % 6
            assert env.games[env.game_index[i]] == games[index[i]]
            counts[games[index[i]]] += 1
    assert set(counts.values()) == {8}  # the seed: 48 servers / 6 games


def learner_replay(agent, u: Unrolls):
    with torch.no_grad():
        out, state = agent.unroll(u.obs[:T], u.initial_state, u.firsts[:T], u.prev_rewards[:T])
    logp = torch.log_softmax(out.logits, -1).gather(-1, u.actions.unsqueeze(-1)).squeeze(-1)
    return logp, state


@pytest.mark.parametrize(("core", "prev_reward_reset"), [("lstm", True), ("srwm", False), ("none", True)])
def test_unrolls_hand_the_state_over_from_actor_to_learner(core, prev_reward_reset):
    """Consecutive unrolls overlap by one row; replaying an unroll from its stored initial state
    gives the behaviour log-probs and ends in the next unroll's initial state."""
    config = tiny_config(core, prev_reward_reset=prev_reward_reset)
    torch.manual_seed(0)
    learner_agent = build_agent(config.agent)
    worker = ActorWorker(config, ActorSpec(id=0, first_env=0, num_envs=4), seed=3)
    worker.set_weights(flatten_weights(learner_agent), version=7)
    unrolls = [Unrolls.zeros(T, 4, learner_agent.state_shapes()) for _ in range(6)]
    finished = [worker.fill(u) for u in unrolls]

    for u in unrolls:  # the reward that arrives with obs_{t+1} is the one a_t earned; on a new episode's
        # first frame 0 (prev_reward_reset) or, as modern-srwm's actors fed it, the last episode's final reward
        expected = torch.where(u.dones, 0.0, u.rewards) if prev_reward_reset else u.rewards
        torch.testing.assert_close(u.prev_rewards[1:], expected)
    assert any((u.rewards[-1] != 0).any() for u in unrolls[:-1]), "no reward crosses an unroll boundary"
    for prev, nxt in itertools.pairwise(unrolls):
        assert torch.equal(prev.obs[T], nxt.obs[0])
        assert torch.equal(prev.firsts[T], nxt.firsts[0])
        assert torch.equal(prev.prev_rewards[T], nxt.prev_rewards[0])
        _, state = learner_replay(learner_agent, prev)
        for k, v in nxt.initial_state.items():
            torch.testing.assert_close(state[k], v, atol=1e-5, rtol=1e-5)
    batch = Unrolls.cat(unrolls[1:3])  # the learner's batch: unrolls side by side
    logp, _ = learner_replay(learner_agent, batch)
    torch.testing.assert_close(logp, batch.logprobs, atol=1e-5, rtol=1e-5)
    assert (batch.versions == 7).all()

    dones = torch.stack([u.dones for u in unrolls])
    assert dones.any(), "no episode ended: the test would not cover resets"
    assert sum(len(f["game"]) for f in finished) == int(dones.sum())
    for u, f in zip(unrolls, finished, strict=True):  # each finished episode is credited to its env's game
        assert sorted(f["game"].tolist()) == sorted((torch.nonzero(u.dones)[:, 1] % 2).tolist())


def test_pool_batches_come_from_the_published_weights():
    config = tiny_config("lstm", num_envs=4, num_actors=2, batch_size=4)
    torch.manual_seed(0)
    agent = build_agent(config.agent)
    pool = ActorPool(config, agent, start_step=0)
    episodes = []
    with pool:
        pool.publish(agent, version=0)
        first = pool.next_batch(lambda e, val: episodes.append(e))
        agent_v0 = copy.deepcopy(agent)
        with torch.no_grad():
            for p in agent.parameters():
                p.add_(0.05 * torch.randn_like(p))
        pool.publish(agent, version=1)
        later = [pool.next_batch(lambda e, val: episodes.append(e)) for _ in range(4)]
    assert first.obs.shape == (T + 1, 4, 3, 64, 64) and (first.versions == 0).all()
    logp, _ = learner_replay(agent_v0, first)
    torch.testing.assert_close(logp, first.logprobs, atol=1e-5, rtol=1e-5)
    assert len(pool.procs) == 0  # closed
    # unrolls stamped with version 1 were acted by the new weights: they replay to their log-probs
    newest = [b for b in later if (b.versions == 1).all()]
    assert newest, "the actors never picked up the published weights"
    for batch in newest:
        logp, _ = learner_replay(agent, batch)
        torch.testing.assert_close(logp, batch.logprobs, atol=1e-5, rtol=1e-5)
    assert not np.isnan(np.concatenate([e["return"] for e in episodes])).any()


def test_actors_get_fresh_seeds_on_restart_and_resume():
    from proclab.rl.actors import actor_seed

    spec = ActorSpec(id=1, first_env=2, num_envs=2)
    seeds = {actor_seed(1, spec, 0)}
    seeds.add(actor_seed(1, replace(spec, generation=1), 0))
    seeds.add(actor_seed(1, spec, 4096))
    seeds.add(actor_seed(1, replace(spec, id=0), 0))
    assert len(seeds) == 4
