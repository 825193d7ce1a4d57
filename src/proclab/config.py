"""Run configuration: typed, frozen dataclasses composed into one config, plus named presets.

Each component owns its settings (:class:`~proclab.envs.EnvConfig`,
:class:`~proclab.models.AgentConfig`, :class:`PPOConfig`, :class:`ImpalaConfig`);
:class:`TrainConfig` composes them for a training run (``algo`` says which algorithm's
settings apply). A *preset* is a complete :class:`TrainConfig` reproducing one setting of
the seeds; command-line flags then override single fields. The resolved config is written to
every run directory as JSON and read back by ``--resume`` with :func:`from_dict`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from proclab.envs import GAME_LISTS, EnvConfig
from proclab.errors import ProclabError, unknown_choice
from proclab.models import AgentConfig, agent_preset


@dataclass(frozen=True)
class PPOConfig:
    """PPO with the implementation details of the Procgen paper, each one switchable (docs/ppo.md)."""

    total_steps: int = 25_000_000
    """Environment steps to train for (all envs, all ranks)."""
    num_steps: int = 256
    """Rollout length per env: a batch is num_envs * num_steps transitions."""
    learning_rate: float = 5e-4
    """Adam learning rate."""
    anneal_lr: bool = False
    """Decay the learning rate linearly to 0 over training."""
    adam_eps: float = 1e-5
    """Adam epsilon (1e-5 as in baselines, not PyTorch's 1e-8)."""
    gamma: float = 0.999
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    update_epochs: int = 3
    """Passes over each rollout."""
    num_minibatches: int = 8
    """Minibatches per pass (recurrent agents: groups of whole env sequences)."""
    chunk_size: int = 0
    """Largest number of samples per forward/backward pass inside a minibatch (memory bound); 0 = whole minibatch."""
    sum_chunk_grads: bool = False
    """Sum (instead of average) the gradients of the chunks of a minibatch, as interpreting-rl-behavior's code did."""
    norm_adv: bool = True
    """Normalise advantages to zero mean, unit std per minibatch."""
    clip_coef: float = 0.2
    """Policy ratio clip range."""
    clip_vloss: bool = True
    """Clip the value loss around the old values (with clip_coef)."""
    ent_coef: float = 0.01
    """Entropy bonus weight."""
    vf_coef: float = 0.5
    """Value loss weight."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    target_kl: float | None = None
    """Stop the update's epochs early when the approximate KL exceeds this."""
    normalize_reward: bool = True
    """Scale rewards by the running std of the discounted return, then clip."""
    reward_norm_gamma: float | None = None
    """Discount of that running return; None = gamma (the seeds used 0.99 with gamma 0.999: a bug)."""
    reward_clip: float = 10.0
    """Clip range of normalised rewards."""


ALGOS = ("ppo", "impala")
REWARD_CLIPPINGS = ("abs_one", "none")
REDUCTIONS = ("sum", "mean")


@dataclass(frozen=True)
class ImpalaConfig:
    """IMPALA with V-trace, as the modern-srwm seed trains it (docs/impala.md); defaults are the seed's."""

    total_steps: int = 300_000_000
    """Environment steps to train for (each update trains on batch_size * unroll_length of them)."""
    num_actors: int = 12
    """Actor processes (or Ray actors); the run's num_envs envs are split evenly over them."""
    unroll_length: int = 50
    """Transitions T per unroll; an unroll holds T+1 observations, the last one starting the next."""
    batch_size: int = 32
    """Env unrolls per learner update (a multiple of the envs per actor)."""
    learning_rate: float = 6e-4
    """RMSprop learning rate."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 at total_steps (the seed's LambdaLR)."""
    rms_alpha: float = 0.99
    """RMSprop smoothing constant."""
    rms_eps: float = 0.01
    """RMSprop epsilon (added outside the square root, PyTorch semantics)."""
    rms_momentum: float = 0.0
    """RMSprop momentum."""
    max_grad_norm: float = 40.0
    """Global gradient-norm clip."""
    gamma: float = 0.99
    """Discount factor (0 after an episode's last step)."""
    baseline_cost: float = 0.5
    """Weight of the value loss 0.5 * (v_s - V(x_s))^2."""
    entropy_cost: float = 0.01
    """Weight of the entropy loss (sum of pi log pi)."""
    rho_bar: float = 1.0
    """V-trace truncation of the importance weights in the value targets."""
    c_bar: float = 1.0
    """V-trace truncation of the trace coefficients c_s."""
    pg_rho_bar: float = 1.0
    """Truncation of the importance weights in the policy-gradient advantages."""
    reward_clipping: str = "abs_one"
    """Rewards in the loss: abs_one = clamp(r, -1, 1) (the seed), none = raw."""
    reduction: str = "sum"
    """Reduce the losses over the T x B entries by sum (the seed; lr scales with the batch) or mean."""
    ray_address: str | None = None
    """Run the actors as Ray actors: auto (the running cluster), ray://HOST:PORT, or local (start one
    here); None: actor processes on this machine (no Ray needed)."""


@dataclass(frozen=True)
class TrainConfig:
    """A training run: environment, agent, algorithm, logging and checkpoints."""

    env: EnvConfig = field(default_factory=EnvConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    impala: ImpalaConfig = field(default_factory=ImpalaConfig)
    algo: str = "ppo"
    """Training algorithm: ppo or impala (its settings are the ppo or the impala fields)."""
    seed: int = 1
    """Seed for levels, initial weights and action sampling."""
    name: str = "default"
    """Experiment name: runs go to RUN_ROOT/ALGO/GAME/NAME/SEED-TIMESTAMP."""
    run_root: Path = Path("runs")
    """Where run directories are created."""
    val_split: str | None = "all"
    """Level split of the validation env stepped alongside training (None: no validation)."""
    val_num_envs: int = 16
    """Envs of the validation env (0: no validation); IMPALA: envs of its validation actor."""
    checkpoint_every: int = 1_000_000
    """Save a checkpoint every this many env steps (and always at the end)."""
    keep_checkpoints: int = 0
    """Keep only the newest N periodic checkpoints (0 = keep all; they show the agent's progress)."""
    device: str = "auto"
    """Torch device: auto (cuda if available), cpu, cuda, cuda:1, ..."""
    precision: str = "auto"
    """Arithmetic: bf16 (autocast), fp32, or auto (bf16 where the hardware has it)."""
    channels_last: bool = True
    """NHWC convolutions (about twice as fast as NCHW on CPU; also the tensor-core layout on GPUs)."""
    torch_threads: int = 0
    """Torch intra-op threads (0 = torch's default)."""
    log_every: int = 1
    """Write a metrics row every this many updates."""
    tensorboard: bool = True
    """Also write TensorBoard event files."""
    wandb_project: str | None = None
    """Mirror metrics to this Weights & Biases project (needs `pip install proclab[wandb]`)."""


# -- presets -------------------------------------------------------------------------------
def _interp(n_envs: int, chunk: int, recurrent: bool, mode: str, split: str) -> TrainConfig:
    """interpreting-rl-behavior's hyperparameter sets (``hyperparams/procgen/config.yml``)."""
    agent = agent_preset("interp-gru") if recurrent else agent_preset("procgen")
    return TrainConfig(
        env=EnvConfig(game=("coinrun",), mode=mode, num_envs=n_envs, split=split, use_backgrounds=False),
        agent=agent,
        ppo=PPOConfig(
            total_steps=200_000_000 if mode == "hard" else 25_000_000,
            anneal_lr=True,
            chunk_size=chunk,
            sum_chunk_grads=True,
            reward_norm_gamma=None,
        ),
        name="interp",
        val_split="all",
        val_num_envs=n_envs,
        checkpoint_every=400_000,
    )


PRESETS: dict[str, TrainConfig] = {
    # The Procgen paper's easy protocol as CleanRL's ppo_procgen.py runs it: unlimited levels,
    # constant LR, 25M steps. No validation env (CleanRL has none), so speed compares like for like.
    "cleanrl": TrainConfig(
        env=EnvConfig(game=("starpilot",), mode="easy", num_envs=64, split="all"),
        agent=agent_preset("procgen"),
        ppo=PPOConfig(),
        name="cleanrl",
        val_split=None,
        val_num_envs=0,
    ),
    "easy": _interp(64, 2048, recurrent=False, mode="easy", split="train"),
    "easy-200": _interp(128, 2048, recurrent=False, mode="easy", split="train"),
    "hard": _interp(256, 2048, recurrent=False, mode="hard", split="train-500"),
    "hard-500": _interp(256, 8192, recurrent=False, mode="hard", split="train-500"),
    "hard-rec": _interp(256, 2048, recurrent=True, mode="hard", split="train-1m"),
    "hard-local-dev": _interp(16, 8192, recurrent=False, mode="hard", split="train-500"),
    "hard-local-dev-rec": _interp(16, 8192, recurrent=True, mode="hard", split="train-1m"),
}
# A few minutes on a laptop CPU: small enough to see learning on an easy game, used by
# `proclab quickstart` and the tests' smoke runs.
PRESETS["tiny"] = TrainConfig(
    env=EnvConfig(game=("bigfish",), mode="easy", num_envs=16, split="train"),
    agent=replace(agent_preset("procgen"), fc=128),
    ppo=PPOConfig(total_steps=200_000, num_steps=128, num_minibatches=4, update_epochs=2),
    name="tiny",
    val_split="test1",
    val_num_envs=8,
    checkpoint_every=50_000,
)

# The same scale with interpreting-rl-behavior's recurrent agent (FC 64, GRU 64) on its game, so
# recordings carry a hidden state for `proclab analyze hidden` (the tiny agent is feed-forward).
PRESETS["tiny-rec"] = replace(
    PRESETS["tiny"],
    env=replace(PRESETS["tiny"].env, game=("coinrun",)),
    agent=agent_preset("interp-gru"),
    name="tiny-rec",
)


def _impala(games: tuple[str, ...], mode: str, split: str) -> TrainConfig:
    """modern-srwm's IMPALA runs (``RL/README.md``): 48 envs, batch 32 x 50, 300M steps, SRWM agent.

    Validation: a validation actor plays the ``val`` levels [500, 700) with the latest weights,
    two envs per game, at most one unroll per update; its last 10 episodes per game are logged
    (the seed's ``valid_num_episodes``).
    """
    return TrainConfig(
        env=EnvConfig(game=games, mode=mode, num_envs=48, split=split),
        agent=agent_preset("srwm-srwm"),
        impala=ImpalaConfig(),
        algo="impala",
        name="srwm",
        val_split="val",
        val_num_envs=2 * len(games),
        checkpoint_every=5_000_000,
    )


PRESETS["impala-procgen"] = _impala(("bigfish",), "easy", "train")
PRESETS["impala-multi-easy6"] = _impala(GAME_LISTS["easy6"], "easy", "train")
PRESETS["impala-memory4"] = _impala(GAME_LISTS["memory4"], "memory", "train-500")


def preset(name: str) -> TrainConfig:
    if name not in PRESETS:
        raise unknown_choice("preset", name, PRESETS)
    return PRESETS[name]


# -- JSON round trip -------------------------------------------------------------------------
def to_dict(config: Any) -> Any:
    """A config as JSON-ready data (tuples become lists, paths absolute strings).

    Paths are made absolute so that a saved config (a run's ``config.json``, a recording's
    attributes) still points at the same files when read from another working directory.
    """
    if dataclasses.is_dataclass(config):
        return {f.name: to_dict(getattr(config, f.name)) for f in dataclasses.fields(config)}
    if isinstance(config, tuple | list):
        return [to_dict(v) for v in config]
    if isinstance(config, Path):
        return str(config.absolute())
    return config


def from_dict(cls: type, data: dict[str, Any]) -> Any:
    """Rebuild a (nested) config dataclass from :func:`to_dict` output, checking field names."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ProclabError(f"config has unknown {cls.__name__} fields: {', '.join(unknown)}")
    return cls(**{k: _coerce(hints[k], v) for k, v in data.items()})


def _coerce(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _coerce(inner[0], value) if len(inner) == 1 else value
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value)
    if origin is tuple:
        args = typing.get_args(tp)
        elem = args[0] if args else Any
        return tuple(_coerce(elem, v) for v in value)
    if tp is Path:
        return Path(value)
    return value
