"""Presets named after a seed reproduce it: every field of every such preset against the specs' tables.

Each expected config is spelled out field by field (``spelled`` refuses one with a field left
out), so a field added later fails here until someone decides, and writes down, the seed's value
for it. Sources: interpreting_rl_behavior.md section 2 (PPO sets), srwm_impala_procgen.md sections
1-2 (IMPALA runs), trex_procgen.md section 6 (policy on the learned reward), anchors.md A1 (the
Procgen paper's protocol).
"""

import dataclasses
from pathlib import Path

import pytest

from proclab.envs import GAME_LISTS, EnvConfig
from proclab.models import AGENT_PRESETS, AgentConfig
from proclab.rl.config import PRESETS, ImpalaConfig, PPOConfig, TrainConfig


def spelled(cls, **fields):
    """``cls(**fields)`` with every one of its fields given explicitly."""
    names = {f.name for f in dataclasses.fields(cls)}
    assert set(fields) == names, (
        f"{cls.__name__}: spell out {sorted(names - set(fields))}; unknown {sorted(set(fields) - names)}"
    )
    return cls(**fields)


def env(games, mode, num_envs, split, backgrounds=True):
    return spelled(
        EnvConfig,
        game=games,
        mode=mode,
        num_envs=num_envs,
        split=split,
        use_backgrounds=backgrounds,
        paint_vel_info=False,
        center_agent=True,
        use_sequential_levels=False,
        restrict_themes=False,
        use_monochrome_assets=False,
        num_threads=4,
        level_rule="",  # the seeds train on the levels procgen makes
    )


def agent(**kw):
    base = dict(
        core="none",
        torso="impala",
        widths=(16, 32, 32),
        pool="torch",
        fc=256,
        prev_reward=False,
        prev_reward_reset=True,
        num_actions=15,
        hidden=128,
        num_layers=2,
        num_heads=8,
        head_dim=16,
        ff=512,
        rnn_size=256,
        rnn_layers=1,
        detach_every_step=False,
        torso_init="torch",
        head_init="orthogonal",
    )
    return spelled(AgentConfig, **{**base, **kw})


# interpreting-rl-behavior: IMPALA CNN 16-32-32, FC 64, GRU 64 (PyTorch init), Xavier CNN, orthogonal heads
INTERP_GRU = agent(core="gru", fc=64, rnn_size=64, torso_init="xavier")
# modern-srwm: FC 256 + clamped previous reward (unmasked at episode starts), 2 layers x (8 heads x 16),
# FF 512, LSTM 256, PyTorch-default heads, state detached every step (published gradients)
SRWM = agent(
    core="srwm", prev_reward=True, prev_reward_reset=False, head_init="torch", detach_every_step=True
)
PROCGEN_FF = agent()  # Procgen paper / baselines: IMPALA CNN, FC 256, orthogonal heads


def ppo(**kw):
    base = dict(
        total_steps=25_000_000,
        num_steps=256,
        learning_rate=5e-4,
        anneal_lr=False,
        adam_eps=1e-5,
        gamma=0.999,
        gae_lambda=0.95,
        update_epochs=3,
        num_minibatches=8,
        chunk_size=0,
        sum_chunk_grads=False,
        norm_adv=True,
        norm_adv_scope="minibatch",
        clip_coef=0.2,
        clip_vloss=True,
        ent_coef=0.01,
        vf_coef=0.5,
        max_grad_norm=0.5,
        replay_reset="first",
        target_kl=None,
        normalize_reward=True,
        reward_norm_gamma=0.99,
        reward_clip=10.0,
        teacher=None,
        teacher_coef=1.0,
        teacher_steps=0,
        acting="eager",
    )
    return spelled(PPOConfig, **{**base, **kw})


def train(env_, agent_, **kw):
    base = dict(
        env=env_,
        agent=agent_,
        ppo=PPOConfig(),
        impala=ImpalaConfig(),
        algo="ppo",
        reward_rule="",  # the seeds train on the game's own reward
        init_from=None,  # a fresh initialisation, as the seeds trained
        seed=1,
        name="default",
        run_root=Path("runs"),
        val_split="all",
        val_num_envs=16,
        checkpoint_every=1_000_000,
        keep_checkpoints=0,
        time_limit=0,
        device="auto",
        precision="auto",
        channels_last=True,
        torch_threads=0,
        log_every=1,
        tensorboard=True,
        wandb_project=None,
        learner_layout="auto",  # speed only: the seeds' results do not depend on it
        follow_load=True,  # speed only, likewise
    )
    return spelled(TrainConfig, **{**base, **kw})


INTERP_TABLE = {  # name: n_envs, mini_batch_size (chunk), recurrent, mode, levels
    "easy": (64, 2048, False, "easy", "train"),
    "easy-200": (128, 2048, False, "easy", "train"),
    "hard": (256, 2048, False, "hard", "train-500"),
    "hard-500": (256, 8192, False, "hard", "train-500"),
    "hard-rec": (256, 2048, True, "hard", "train-1m"),
    "hard-local-dev": (16, 8192, False, "hard", "train-500"),
    "hard-local-dev-rec": (16, 8192, True, "hard", "train-1m"),
}


def interp_expected(n_envs, chunk, recurrent, mode, split):
    """epoch 3, 8 minibatches, gamma 0.999, lambda 0.95, lr 5e-4 decaying to 0, clip 0.2 (policy and
    value), vf 0.5, ent 0.01, grad clip 0.5, Adam eps 1e-5, summed chunk gradients, advantages
    normalised over the rollout, VecNormalize(gamma=0.99), training masks 1 - done_t, no backgrounds,
    a validation env on unbounded levels, a checkpoint every 400k steps."""
    return train(
        env(("coinrun",), mode, n_envs, split, backgrounds=False),
        INTERP_GRU if recurrent else PROCGEN_FF,
        ppo=ppo(
            total_steps=200_000_000 if mode == "hard" else 25_000_000,
            anneal_lr=True,
            chunk_size=chunk,
            sum_chunk_grads=True,
            norm_adv_scope="rollout",
            replay_reset="done",
        ),
        name="interp",
        val_split="all",
        val_num_envs=n_envs,
        checkpoint_every=400_000,
    )


@pytest.mark.parametrize("name", list(INTERP_TABLE))
def test_interpreting_rl_behavior_presets(name):
    assert PRESETS[name] == interp_expected(*INTERP_TABLE[name])


IMPALA_RUNS = {  # modern-srwm RL/README.md: single game, multi-task easy-6 (200 levels), memory-4 (500 levels)
    "impala-procgen": (("bigfish",), "easy", "train"),
    "impala-multi-easy6": (GAME_LISTS["easy6"], "easy", "train"),
    "impala-memory4": (GAME_LISTS["memory4"], "memory", "train-500"),
}


@pytest.mark.parametrize("name", list(IMPALA_RUNS))
def test_modern_srwm_presets(name):
    games, mode, split = IMPALA_RUNS[name]
    impala = spelled(
        ImpalaConfig,
        total_steps=300_000_000,
        num_actors=12,
        unroll_length=50,
        batch_size=32,
        learning_rate=6e-4,
        anneal_lr=True,
        rms_alpha=0.99,
        rms_eps=0.01,
        rms_momentum=0.0,
        max_grad_norm=40.0,
        gamma=0.99,
        baseline_cost=0.5,
        entropy_cost=0.01,
        rho_bar=1.0,
        c_bar=1.0,
        pg_rho_bar=1.0,
        reward_clipping="abs_one",
        reduction="sum",
        ray_address=None,
    )
    expected = train(
        env(games, mode, 48, split),
        SRWM,
        impala=impala,
        algo="impala",
        name="srwm",
        val_split="val",
        val_num_envs=2 * len(games),
        checkpoint_every=5_000_000,
    )
    assert PRESETS[name] == expected
    bptt = PRESETS[f"{name}-bptt"]  # proclab's variant differs in the gradient semantics (and name) only
    assert bptt == dataclasses.replace(
        expected, agent=dataclasses.replace(SRWM, detach_every_step=False), name="srwm-bptt"
    )
    assert GAME_LISTS["easy6"] == ("bigfish", "fruitbot", "maze", "leaper", "plunder", "starpilot")
    assert GAME_LISTS["memory4"] == ("dodgeball", "heist", "maze", "miner")


def test_procgen_paper_hard_preset():
    """train-procgen hard: 4 workers x 64 envs, 256 steps, 8 minibatches, 3 epochs, constant lr 5e-4,
    500 levels, 200M steps, baselines VecNormalize (gamma 0.99), a 64-env test worker on all levels."""
    expected = train(
        env(("coinrun",), "hard", 256, "train-500"),
        PROCGEN_FF,
        ppo=ppo(total_steps=200_000_000),
        name="procgen-hard",
        val_split="all",
        val_num_envs=64,
    )
    assert PRESETS["procgen-hard"] == expected


def test_trex_policy_preset():
    """procedural-generalization train_policy.py: 64 envs, num_levels=0, easy, Procgen-paper PPO,
    VecNormalize gamma 0.99, 25M steps, checkpoint every 20 updates, no validation env."""
    expected = train(
        env(("coinrun",), "easy", 64, "all"),
        PROCGEN_FF,
        ppo=ppo(),
        name="trex",
        val_split=None,
        val_num_envs=0,
        checkpoint_every=20 * 64 * 256,
    )
    assert PRESETS["trex-policy"] == expected


def test_proclab_presets_differ_from_the_seed_in_named_fields_only():
    seed, own = PRESETS["hard-rec"], PRESETS["hard-rec-proclab"]
    assert own == dataclasses.replace(
        seed,
        name="interp-proclab",
        ppo=dataclasses.replace(
            seed.ppo, reward_norm_gamma=None, norm_adv_scope="minibatch", replay_reset="first"
        ),
    )
    cleanrl = PRESETS["cleanrl"]  # CleanRL's ppo_procgen.py fixed the normaliser's discount to gamma
    assert cleanrl.ppo == ppo(reward_norm_gamma=None) and cleanrl.env == env(
        ("starpilot",), "easy", 64, "all"
    )


def test_agent_presets_of_the_seeds():
    assert AGENT_PRESETS["interp-gru"] == INTERP_GRU
    assert AGENT_PRESETS["procgen"] == PROCGEN_FF
    assert AGENT_PRESETS["srwm-srwm-published"] == SRWM
    for core in ("none", "lstm", "delta", "srwm", "fake_sr", "sr_delta", "no_carry_sr"):
        assert AGENT_PRESETS[f"srwm-{core}"] == dataclasses.replace(SRWM, core=core, detach_every_step=False)
