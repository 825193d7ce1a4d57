"""Run configuration: typed, frozen dataclasses composed into one config, plus named presets.

Each component owns its settings (:class:`~proclab.envs.EnvConfig`,
:class:`~proclab.models.AgentConfig`, :class:`PPOConfig`, :class:`ImpalaConfig`);
:class:`TrainConfig` composes them for a training run (``algo`` says which algorithm's
settings apply). A *preset* is a complete :class:`TrainConfig` reproducing one setting of
the seeds; command-line flags then override single fields. The resolved config is written to
every run directory as JSON and read back by ``--resume`` (:mod:`proclab.io.configs`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import dataclass, field, replace
from pathlib import Path

import tyro

from proclab.envs import GAME_LISTS, EnvConfig, check_disjoint, parse_split
from proclab.envs.rewards import check_reward_rule
from proclab.envs.rules import check_rule
from proclab.errors import ProclabError, unknown_choice
from proclab.models import STATELESS_CORES, AgentConfig, agent_preset
from proclab.run.layout import validate_layout
from proclab.run.runtime import RuntimeConfig


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
    """Normalise advantages to zero mean, unit std (over norm_adv_scope)."""
    norm_adv_scope: str = "minibatch"
    """What advantages are normalised over: minibatch (the Procgen paper's baselines, CleanRL) or rollout
    (once over the whole rollout before minibatching, as interpreting-rl-behavior's code did)."""
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
    replay_reset: str = "first"
    """Recurrent replay resets the state before step t where obs_t starts an episode (first, as the
    actor did), or where the episode ends after step t (done: interpreting-rl-behavior's training
    pass, one step earlier than its actor; docs/fidelity.md)."""
    target_kl: float | None = None
    """Stop the update's epochs early when the approximate KL exceeds this."""
    normalize_reward: bool = True
    """Scale rewards by the running std of the discounted return, then clip."""
    reward_norm_gamma: float | None = None
    """Discount of that running return; None = gamma (the seeds used 0.99 with gamma 0.999: a bug)."""
    reward_clip: float = 10.0
    """Clip range of normalised rewards."""
    teacher: str | None = None
    """Kickstarting (Schmitt et al. 2018): a planner of the game's ground truth (coin-planner, end-planner,
    cheese-planner, corner-planner: proclab.models.planners) labels every state the agent reaches with the
    action it would take, and the loss adds teacher_coef times the cross-entropy of the agent's policy to
    that action. On CoinRun the agent learns the planner's goal in a fraction of the steps PPO alone needs
    (docs/ppo.md); None: PPO alone."""
    teacher_coef: float = 1.0
    """Weight of the cross-entropy to the teacher's action (at the start of training)."""
    teacher_steps: int = 0
    """Env steps over which teacher_coef decays linearly to 0, leaving PPO alone; 0: it never decays."""
    acting: str = "eager"
    """How rollouts are collected: eager (step by step, the agent on all envs), graph (the forward pass
    and sampling replayed as one CUDA graph per step on CUDA devices), or overlap (graph, with the
    envs in two halves, one half stepping while the other's actions are computed). graph and overlap
    fill rollouts of the same statistics (tests/rl/test_overlap.py); their GPU speed is not measured
    yet (docs/gpu.md), so eager stays the default."""


ALGOS = ("ppo", "impala")
ACTING = ("eager", "graph", "overlap")
ADV_NORM_SCOPES = ("minibatch", "rollout")
REPLAY_RESETS = ("first", "done")
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
class TrainConfig(RuntimeConfig):
    """A training run: environment, agent, algorithm, logging and checkpoints."""

    env: EnvConfig = field(default_factory=EnvConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    impala: ImpalaConfig = field(default_factory=ImpalaConfig)
    algo: str = "ppo"
    """Training algorithm: ppo or impala (its settings are the ppo or the impala fields)."""
    reward_rule: str = ""
    """Pay the game's second goal instead of its own (proclab.envs.rewards): end-pays (CoinRun: the end of
    the level pays 10 and ends the episode, the coin pays nothing) or corner-pays (Maze: the top-right corner
    pays, the cheese nothing); empty: the game's own reward. Training only: analyses play the game's rules."""
    init_from: str | None = None
    """Start from this agent's weights (what proclab.load takes: a registry name, a run or a checkpoint) instead
    of a fresh initialisation: fine-tuning, e.g. a field agent paid for another goal. Its architecture replaces
    the agent settings (config.json records it); a resumed run reads its own checkpoint. PPO only."""
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
    time_limit: float = 0
    """Stop after this many seconds of training in this process, with a checkpoint, even before
    total_steps (0: no limit): a fixed wall-clock budget (the quickstart, a cluster job's slot)."""
    log_every: int = 1
    """Write a metrics row every this many updates."""
    tensorboard: bool = True
    """Also write TensorBoard event files."""
    wandb_project: str | None = None
    """Mirror metrics to this Weights & Biases project (needs `pip install proclab[wandb]`)."""
    learner_layout: str = "auto"
    """PPO on a CPU: how the learner and the actor split their work, PIECE:SCHEME[,acting:SCHEME]
    (PIECE whole or samples per pass; SCHEME intra = intra-op threads, workers = one piece per core
    side by side; e.g. 64:intra,acting:workers). auto: the fastest for this CPU, precision and
    agent, timed once (a few seconds) and cached; measure: time it again. Speed only: the results
    agree within float rounding. config.json records the layout used, which a resumed run keeps."""
    follow_load: bool = True
    """PPO on a CPU with a timed layout (auto, measure): when three updates in a row take over 1.5x,
    or under 1/1.5, of the pace the run settled at, the load has changed, so the layout is timed
    again and the fastest kept (printed; config.json and config_history.jsonl record it). A layout
    given explicitly, and runs on several processes, keep theirs."""

    def end_step(self) -> int:
        """The env step at which the run is complete: whole updates (rollouts or batches) of
        ``total_steps`` (what its last checkpoint's ``step`` reads when it finished)."""
        if self.algo == "impala":
            batch = self.impala.batch_size * self.impala.unroll_length
            return self.impala.total_steps // batch * batch
        batch = self.env.num_envs * self.ppo.num_steps
        return self.ppo.total_steps // batch * batch

    def validate(self, world: int = 1) -> None:
        """Refuse configurations that cannot run (``world`` processes), before anything is created on disk."""
        if self.algo not in ALGOS:
            raise unknown_choice("algo", self.algo, ALGOS)
        games = self.env.games()
        check_rule(self.env.level_rule, games)
        check_reward_rule(self.reward_rule, games)
        train_split = parse_split(self.env.split)
        if self.val_split is not None and self.val_num_envs > 0:
            check_disjoint(train_split, parse_split(self.val_split))
            if self.val_num_envs < len(games):
                raise ProclabError(f"val_num_envs={self.val_num_envs} is smaller than the {len(games)} games")
        if self.algo == "impala":
            if self.init_from is not None:
                raise ProclabError("--init-from starts PPO runs; IMPALA starts from a fresh agent")
            self._validate_impala(world)
        else:
            self._validate_ppo(world)
            validate_layout(self.learner_layout)

    def _validate_ppo(self, world: int) -> None:
        env, ppo = self.env, self.ppo
        if env.num_envs < 1 or env.num_envs % world:
            raise ProclabError(
                f"num_envs={env.num_envs} must be a positive multiple of the {world} processes"
            )
        batch = env.num_envs * ppo.num_steps
        if ppo.total_steps < batch:
            raise ProclabError(
                f"total_steps={ppo.total_steps} is smaller than one rollout (num_envs {env.num_envs} x "
                f"num_steps {ppo.num_steps} = {batch}); raise --total-steps or shrink the rollout"
            )
        if ppo.num_minibatches < 1 or ppo.update_epochs < 1:
            raise ProclabError("num_minibatches and update_epochs must be >= 1")
        if ppo.acting not in ACTING:
            raise unknown_choice("acting", ppo.acting, ACTING)
        games = len(env.games())
        if ppo.teacher is not None:
            if games != 1 or ppo.acting != "eager":
                raise ProclabError("--teacher teaches one game with --acting eager")
            if ppo.teacher_coef < 0 or ppo.teacher_steps < 0:
                raise ProclabError("--teacher-coef and --teacher-steps must be >= 0")
        if ppo.acting == "overlap" and (env.num_envs // world) % (2 * games):
            raise ProclabError(
                f"--acting overlap halves each process's envs per game: {env.num_envs // world} envs "
                f"of {games} games cannot be; use an even number of envs per game"
            )
        if ppo.norm_adv_scope not in ADV_NORM_SCOPES:
            raise unknown_choice("norm_adv_scope", ppo.norm_adv_scope, ADV_NORM_SCOPES)
        if ppo.replay_reset not in REPLAY_RESETS:
            raise unknown_choice("replay_reset", ppo.replay_reset, REPLAY_RESETS)
        # minibatches split whole env sequences (agents with memory) or samples: all equal, as many as asked
        sequences = self.agent.core not in STATELESS_CORES
        items = env.num_envs // world * (1 if sequences else ppo.num_steps)
        if items % ppo.num_minibatches:
            what = "envs per process" if sequences else "samples per process (envs x num_steps)"
            raise ProclabError(
                f"num_minibatches={ppo.num_minibatches} does not divide the {items} {what}; "
                "choose a divisor so that every minibatch is the same size"
            )

    def _validate_impala(self, world: int) -> None:
        cfg, env = self.impala, self.env
        games = env.games()
        if world > 1:
            raise ProclabError("IMPALA scales with actors (--num-actors, --ray-address), not torchrun")
        if cfg.num_actors < 1 or env.num_envs < 1 or env.num_envs % cfg.num_actors:
            raise ProclabError(
                f"num_envs={env.num_envs} does not split evenly over num_actors={cfg.num_actors}; "
                "give every actor the same number of envs"
            )
        if env.num_envs % len(games):
            raise ProclabError(
                f"multi-task list of {len(games)} games ({', '.join(games)}) does not divide num_envs={env.num_envs}; "
                f"use a multiple of {len(games)} envs so that every game gets the same number"
            )
        per_actor = env.num_envs // cfg.num_actors
        if cfg.batch_size < 1 or cfg.batch_size % per_actor:
            raise ProclabError(
                f"batch_size={cfg.batch_size} is not a multiple of the {per_actor} envs per actor "
                f"(num_envs {env.num_envs} / num_actors {cfg.num_actors}); an actor sends all its envs' unrolls at once"
            )
        if cfg.unroll_length < 1:
            raise ProclabError(f"unroll_length={cfg.unroll_length} must be >= 1")
        batch = cfg.batch_size * cfg.unroll_length
        if cfg.total_steps < batch:
            raise ProclabError(
                f"total_steps={cfg.total_steps} is smaller than one batch (batch_size {cfg.batch_size} x "
                f"unroll_length {cfg.unroll_length} = {batch}); raise --total-steps or shrink the batch"
            )
        if cfg.reward_clipping not in REWARD_CLIPPINGS:
            raise unknown_choice("reward clipping", cfg.reward_clipping, REWARD_CLIPPINGS)
        if cfg.reduction not in REDUCTIONS:
            raise unknown_choice("loss reduction", cfg.reduction, REDUCTIONS)
        bad = [f"{k}={getattr(cfg, k)}" for k in ("rho_bar", "c_bar", "pg_rho_bar") if getattr(cfg, k) <= 0]
        if bad:
            raise ProclabError(f"V-trace truncation levels must be positive: {', '.join(bad)}")
        if cfg.ray_address and importlib.util.find_spec("ray") is None:
            raise ProclabError("--ray-address needs Ray: pip install 'proclab[distributed]'")


# -- command line ----------------------------------------------------------------------------
def algo_flags(arg_classes: dict[str, type], config_class: type = TrainConfig):
    """Flag parsing for :class:`~proclab.run.parser.RunParser`: the flag set of the config's ``algo``.

    ``arg_classes`` maps each algorithm to a subclass of ``config_class`` that hides the other
    algorithm's settings; parsed flags come back as a ``config_class``.
    """

    def flags(rest: list[str], default: TrainConfig, prog: str, description: str | None) -> TrainConfig:
        if default.algo not in arg_classes:
            raise unknown_choice("algo", default.algo, tuple(arg_classes))
        cls = arg_classes[default.algo]
        parsed = tyro.cli(
            cls,
            args=rest,
            default=_as(cls, default, config_class),
            prog=prog,
            description=description,
            config=(tyro.conf.OmitArgPrefixes,),
        )
        return _as(config_class, parsed, config_class)

    return flags


def _as(cls: type, config: TrainConfig, fields_of: type) -> TrainConfig:
    return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(fields_of)})


# -- presets -------------------------------------------------------------------------------
# Presets named after a seed reproduce it; each deviation proclab offers is a field, listed with
# its switch in docs/fidelity.md. proclab's own settings have their own names (tiny,
# hard-rec-proclab, impala-*-bptt).
def _interp(n_envs: int, chunk: int, recurrent: bool, mode: str, split: str) -> TrainConfig:
    """interpreting-rl-behavior's hyperparameter sets (``hyperparams/procgen/config.yml``), with the
    seed's training dynamics: reward normaliser discount 0.99, advantages normalised once per
    rollout, summed chunk gradients, and its replay resets (``done``)."""
    agent = agent_preset("interp-gru") if recurrent else agent_preset("procgen")
    return TrainConfig(
        env=EnvConfig(game=("coinrun",), mode=mode, num_envs=n_envs, split=split, use_backgrounds=False),
        agent=agent,
        ppo=PPOConfig(
            total_steps=200_000_000 if mode == "hard" else 25_000_000,
            anneal_lr=True,
            chunk_size=chunk,
            sum_chunk_grads=True,
            norm_adv_scope="rollout",
            replay_reset="done",
            reward_norm_gamma=0.99,
        ),
        name="interp",
        val_split="all",
        val_num_envs=n_envs,
        checkpoint_every=400_000,
    )


PRESETS: dict[str, TrainConfig] = {
    # The Procgen paper's easy protocol as CleanRL's ppo_procgen.py runs it: unlimited levels,
    # constant LR, 25M steps, reward normaliser discount 0.999 (CleanRL's fix of baselines' 0.99).
    # No validation env (CleanRL has none), so speed compares like for like.
    "cleanrl": TrainConfig(
        env=EnvConfig(game=("starpilot",), mode="easy", num_envs=64, split="all"),
        agent=agent_preset("procgen"),
        ppo=PPOConfig(),
        name="cleanrl",
        val_split=None,
        val_num_envs=0,
    ),
    # The Procgen paper's hard protocol (openai/train-procgen, anchors.md A1): 4 workers x 64 envs on
    # 500 training levels, 200M steps, constant LR, baselines' VecNormalize (discount 0.99); a test
    # worker of 64 envs plays the full level distribution. Under torchrun with 4 processes each
    # process normalises advantages over its own minibatch, exactly as each MPI worker did.
    "procgen-hard": TrainConfig(
        env=EnvConfig(game=("coinrun",), mode="hard", num_envs=256, split="train-500"),
        agent=agent_preset("procgen"),
        ppo=PPOConfig(total_steps=200_000_000, reward_norm_gamma=0.99),
        name="procgen-hard",
        val_split="all",
        val_num_envs=64,
    ),
    # procedural-generalization's train_policy.py (trex_procgen.md section 6): the Procgen paper's easy
    # PPO on unbounded levels, 64 envs, 25M steps, VecNormalize discount 0.99, no validation env,
    # a checkpoint every 20 updates. 'proclab train --reward-model' starts from it.
    "trex-policy": TrainConfig(
        env=EnvConfig(game=("coinrun",), mode="easy", num_envs=64, split="all"),
        agent=agent_preset("procgen"),
        ppo=PPOConfig(reward_norm_gamma=0.99),
        name="trex",
        val_split=None,
        val_num_envs=0,
        checkpoint_every=20 * 64 * 256,
    ),
    "easy": _interp(64, 2048, recurrent=False, mode="easy", split="train"),
    "easy-200": _interp(128, 2048, recurrent=False, mode="easy", split="train"),
    "hard": _interp(256, 2048, recurrent=False, mode="hard", split="train-500"),
    "hard-500": _interp(256, 8192, recurrent=False, mode="hard", split="train-500"),
    "hard-rec": _interp(256, 2048, recurrent=True, mode="hard", split="train-1m"),
    "hard-local-dev": _interp(16, 8192, recurrent=False, mode="hard", split="train-500"),
    "hard-local-dev-rec": _interp(16, 8192, recurrent=True, mode="hard", split="train-1m"),
}
# hard-rec with proclab's fixes of the seed's dynamics (docs/fidelity.md): the reward normaliser
# discounts with gamma, advantages are normalised per minibatch, replay resets where the actor did.
PRESETS["hard-rec-proclab"] = replace(
    PRESETS["hard-rec"],
    ppo=replace(
        PRESETS["hard-rec"].ppo, reward_norm_gamma=None, norm_adv_scope="minibatch", replay_reset="first"
    ),
    name="interp-proclab",
)
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

# `proclab quickstart`'s agent: tiny-rec's GRU agent with half the conv channels on CoinRun drawn
# without backgrounds in one theme (the seed trains without backgrounds; one theme makes the world
# model learnable in minutes), updated after every 32 x 32 steps (3 epochs) at learning rate 1e-3
# with gamma 0.99, which pays for reaching the coin quickly: about 3x the steps per second of
# tiny-rec on an fp32 CPU and many more updates per step, so it learns to run for the coin within
# tens of thousands of steps (episode length 300 -> 70 by 35k steps).
PRESETS["quickstart"] = replace(
    PRESETS["tiny-rec"],
    env=replace(PRESETS["tiny-rec"].env, num_envs=32, use_backgrounds=False, restrict_themes=True),
    agent=replace(PRESETS["tiny-rec"].agent, widths=(8, 16, 16)),
    ppo=replace(
        PRESETS["tiny-rec"].ppo,
        num_steps=32,
        num_minibatches=2,
        update_epochs=3,
        learning_rate=1e-3,
        gamma=0.99,
    ),
    name="quickstart",
    val_split=None,
)


def _impala(games: tuple[str, ...], mode: str, split: str, bptt: bool = False) -> TrainConfig:
    """modern-srwm's IMPALA runs (``RL/README.md``): 48 envs, batch 32 x 50, 300M steps, SRWM agent.

    The SRWM state is detached after every step, as the published code did (so W_q, W_k and w_b
    never train; srwm_impala_procgen.md section 0); ``bptt`` backpropagates through time within an
    unroll instead (proclab's ``impala-*-bptt`` presets, not a published setting).

    Validation: a validation actor plays the ``val`` levels [500, 700) with the latest weights,
    two envs per game, at most one unroll per update; its last 10 episodes per game are logged
    (the seed's ``valid_num_episodes``).
    """
    return TrainConfig(
        env=EnvConfig(game=games, mode=mode, num_envs=48, split=split),
        agent=agent_preset("srwm-srwm" if bptt else "srwm-srwm-published"),
        impala=ImpalaConfig(),
        algo="impala",
        name="srwm-bptt" if bptt else "srwm",
        val_split="val",
        val_num_envs=2 * len(games),
        checkpoint_every=5_000_000,
    )


PRESETS["impala-procgen"] = _impala(("bigfish",), "easy", "train")
PRESETS["impala-multi-easy6"] = _impala(GAME_LISTS["easy6"], "easy", "train")
PRESETS["impala-memory4"] = _impala(GAME_LISTS["memory4"], "memory", "train-500")
PRESETS["impala-procgen-bptt"] = _impala(("bigfish",), "easy", "train", bptt=True)
PRESETS["impala-multi-easy6-bptt"] = _impala(GAME_LISTS["easy6"], "easy", "train", bptt=True)
PRESETS["impala-memory4-bptt"] = _impala(GAME_LISTS["memory4"], "memory", "train-500", bptt=True)


def preset(name: str) -> TrainConfig:
    if name not in PRESETS:
        raise unknown_choice("preset", name, PRESETS)
    return PRESETS[name]
