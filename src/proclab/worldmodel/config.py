"""What a world model is made of and how it is trained: frozen dataclasses and named presets (sizes).

:class:`WorldModelConfig` fixes the architecture (docs/worldmodel.md has a table per preset),
:class:`LossWeights` the weights of the loss table of the interpreting-rl-behavior spec (§4.2),
and :class:`WMTrainConfig` a training run. ``paper`` is the seed's Gen-2 model; ``small``
trains on a laptop CPU in minutes; ``cpu`` is ``small`` built for short-horizon fidelity (a decoder that
copies the previous frame, shifted with the camera, and a loss on the pixels that change); ``tiny``
exists for the tests. A preset (``proclab wm train --preset``) is a complete
:class:`WMTrainConfig` (the batch size goes with the model); flags override single fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated

import tyro

from proclab.errors import ProclabError, unknown_choice
from proclab.io.arguments import AGENT, DATA
from proclab.io.configs import from_dict
from proclab.run.runtime import RuntimeConfig

RSSM_CELLS = ("norm_gru", "dreamer_gru")
ENCODER_BLOCKS = ("seed", "preact")
# What models saved before these fields existed were built with: they load (and resume) unchanged.
PRE_FIDELITY_MODEL = {"rssm_cell": "dreamer_gru", "encoder_block": "preact"}
PRE_FIDELITY_LOSS = {"bottleneck_diagonal": False}


@dataclass(frozen=True)
class WorldModelConfig:
    """The generative agent-environment model: bottleneck encoder, converters, RSSM, decoder, heads."""

    num_init_steps: int = 3
    """Frames the encoder reads; the last one is also the first simulated frame (>= 2)."""
    num_sim_steps: int = 32
    """Simulated steps per training window (windows hold num_init_steps + num_sim_steps - 1 rows)."""
    bottleneck: int = 128
    """Size of the unit-norm bottleneck vector."""
    encoder_channels: tuple[int, ...] = (64, 64, 64, 128)
    """Channels of the encoder's residual down-blocks (each halves the frame size)."""
    encoder_block: str = "seed"
    """Encoder down-block: seed (conv(LN(x)), then conv(LeakyReLU_0.01(LN(h))), LayerNorm affine per
    position, shortcut pool then 1x1 conv) or preact (LeakyReLU_0.2 before both convs, per-channel
    norm affine, shortcut 1x1 conv then pool)."""
    encoder_rnn: int = 512
    """Hidden size of the encoder's GRU over the initial frames (and of its two-layer output MLP)."""
    env_converter: tuple[int, ...] = (832, 832)
    """Hidden widths of the MLP from the bottleneck to the initial environment state (h, z logits)."""
    agent_converter: tuple[int, ...] = (96, 96)
    """Hidden widths of the MLP from the (detached) bottleneck to the agent's initial state."""
    action_converter: tuple[int, ...] = (71, 71)
    """Hidden widths of the MLP from the (detached) bottleneck to the previous action."""
    agent_state_tanh: bool = True
    """Squash the predicted initial agent state with tanh (right for GRU/LSTM hidden states; turn it
    off for cores with unbounded states such as fast weights)."""
    deter: int = 512
    """Deterministic RSSM state (the LayerNorm GRU's hidden size): env_h."""
    rssm_cell: str = "norm_gru"
    """RSSM cell: norm_gru (the seed's, pydreamer's NormGRUCell: a LayerNorm per gate, reset on the
    hidden part only, no update bias) or dreamer_gru (one normalised projection of [x, h], reset
    over the whole candidate, update bias -1)."""
    hidden: int = 1000
    """Width of the RSSM's input, prior and posterior layers."""
    stoch: int = 32
    """Categorical variables of the stochastic RSSM state."""
    classes: int = 32
    """Classes per categorical."""
    embed_depth: int = 32
    """Channels of the first layer of the frame encoder the posterior reads (then x2, x4, x8)."""
    decoder_depth: int = 48
    """Channels of the image decoder's last hidden layer (earlier layers x2, x4; its input x32)."""
    decoder_copy: bool = False
    """Decode each frame as a per-pixel gate between the previous frame, copied, and a generated one (the
    copy path of action-conditional video prediction, Oh et al. 2015): what does not change need not be
    redrawn from the latent state, so small static objects survive. The previous frame is the model's own
    last frame (the true one before step 0 when the simulation starts from real frames)."""
    camera_shift: float = 0.0
    """With decoder_copy: the largest shift, in pixels, of the previous frame before it is copied,
    predicted from the state (CoinRun's view follows the agent, so the whole scene moves); 0: no shift."""
    camera_motion: bool = False
    """With camera_shift: predict each step's shift as the previous shift plus a change read from the copied
    frame, the action and the state (layers.CameraMotion), instead of from the state alone: the camera's
    velocity persists from step to step, and a latent state must otherwise learn it from scratch."""
    frame_refiner: bool = False
    """With decoder_copy: each frame is the previous one, moved with the camera, plus a residual that a small
    U-Net computes from it and the state (layers.FrameRefiner), instead of a per-pixel gate between that copy
    and a frame the decoder redraws from the state alone (the decoder then draws only the first frame of a
    dream that starts from a bottleneck, with nothing to copy)."""
    copy_gate_bias: float = 0.0
    """With decoder_copy: added to the copy gate's logit. Positive starts the decoder copying (gate
    sigmoid(0.5 + bias) at initialisation), so that an untrained model already predicts about as well as
    repeating the last frame and training improves on that, instead of first learning to copy."""
    head_layers: int = 4
    """Hidden layers of the reward and done heads."""
    head_hidden: int = 400
    """Width of the reward and done heads."""

    def __post_init__(self):
        object.__setattr__(self, "encoder_channels", tuple(self.encoder_channels))
        for name in ("env_converter", "agent_converter", "action_converter"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.rssm_cell not in RSSM_CELLS:
            raise unknown_choice("rssm cell", self.rssm_cell, RSSM_CELLS)
        if self.encoder_block not in ENCODER_BLOCKS:
            raise unknown_choice("encoder block", self.encoder_block, ENCODER_BLOCKS)
        if self.num_init_steps < 2:
            raise ProclabError(
                "num_init_steps must be >= 2 (the first simulated step's previous action is a recorded one), "
                f"got {self.num_init_steps}"
            )
        positive = (
            "num_sim_steps",
            "bottleneck",
            "encoder_rnn",
            "deter",
            "hidden",
            "stoch",
            "classes",
            "embed_depth",
            "decoder_depth",
            "head_hidden",
        )
        sizes = {k: getattr(self, k) for k in positive}
        bad = [f"{k}={v}" for k, v in sizes.items() if v < 1]
        if len(self.encoder_channels) != 4:
            bad.append(f"encoder_channels={self.encoder_channels} (needs 4 blocks: 64x64 -> 4x4)")
        if bad:
            raise ProclabError(f"world model sizes must be positive: {', '.join(bad)}")
        if self.frame_refiner and not self.decoder_copy:
            raise ProclabError("frame_refiner needs decoder_copy (it refines the copied frame)")
        if self.camera_motion and not self.camera_shift:
            raise ProclabError("camera_motion needs camera_shift > 0 (the largest shift it may predict)")
        if self.copy_gate_bias and not self.decoder_copy:
            raise ProclabError(
                f"copy_gate_bias={self.copy_gate_bias} needs decoder_copy (it biases the copy gate)"
            )
        if self.camera_shift < 0 or (self.camera_shift and not self.decoder_copy):
            raise ProclabError(
                f"camera_shift must be >= 0 and needs decoder_copy (it shifts the copied frame), got "
                f"camera_shift={self.camera_shift}, decoder_copy={self.decoder_copy}"
            )

    @property
    def window(self) -> int:
        """Rows of a training window: the initial frames plus the simulated steps after the last one."""
        return self.num_init_steps + self.num_sim_steps - 1


@dataclass(frozen=True)
class LossWeights:
    """Weights of the loss terms (interpreting-rl-behavior §4.2); each term is logged unweighted."""

    image: float = 1.0
    """0.5 * sum over pixels of (x_hat - x)^2 per step."""
    reward: float = 1.0
    """0.5 * (r_hat - r)^2 per step."""
    done: float = 1.0
    """Bernoulli negative log-likelihood of the terminal flag per step."""
    agent_state: float = 1.0
    """0.5 * sum of (h_hat - h)^2 over the agent's state, up to the first terminal."""
    kl: float = 12.0
    """Balanced KL between the RSSM posterior and prior, summed over the categoricals."""
    kl_balance: float = 0.8
    """Share of the KL gradient that trains the prior (the rest regularises the posterior)."""
    env_update: float = 0.5
    """||h_t - h_{t-1}||_2 of the deterministic RSSM state per step."""
    bottleneck: float = 100.0
    """Uniformity penalty log sum_{i != j} exp(-||b_i - b_j||^2) over the batch."""
    bottleneck_diagonal: bool = True
    """Add the seed's exp(1) constant per vector (its diagonal) inside that log sum; this scales the
    gradient down. False: the sum over i != j alone."""
    init_state: float = 1.0
    """Summed squared error of the predicted initial agent state."""
    init_action: float = 1.0
    """Cross-entropy of the predicted previous action."""
    changed_pixels: float = 0.0
    """Extra weight of the image loss on pixels whose true value changed since the previous true frame:
    each such pixel's squared error counts 1 + changed_pixels times. A coin or a saw covers a few dozen of
    the 4,096 pixels and vanishes under a plain sum; it moves on screen whenever the camera does."""
    change_threshold: float = 0.05
    """A pixel has changed when some channel moved by more than this (in [0, 1]) between true frames."""
    shift: float = 0.0
    """With camera_shift: squared error (pixels^2, both axes) of the predicted shift against the shift
    measured between consecutive true frames (worldmodel/camera.py); the image loss alone teaches it slowly."""
    policy_kl: float = 0.0
    """Weight of KL(recorded policy || the agent's policy on the simulated frame), per step (needs a store
    with the agent's logits): pixel errors weigh what covers many pixels, while the agent in the loop may
    act on a few (its action on teacher-forced frames matched the recorded one half of the time after 4
    hours of the cpu preset), and a dream goes where the agent's actions take it."""
    open_loop: float = 0.0
    """Weight of a second pass per update: the prior driven by the recorded actions from the encoded start
    (open loop, as evaluation and dreams run it), its image, shift, reward and done terms each weighted this
    times its teacher-forced twin. Teacher forcing alone trains the decoder and the reward head on posterior
    states only, which a dream never has."""


@dataclass(frozen=True)
class WMTrainConfig(RuntimeConfig):
    """Train the generative agent-environment model on an episode store (teacher forcing)."""

    data: Annotated[Path, DATA] = Path("episodes")
    """Episode store recorded with 'proclab record' (frames, actions, rewards, agent states)."""
    agent: Annotated[Path | None, AGENT] = None
    """The agent in the loop: a proclab run or checkpoint directory (default: the checkpoint that recorded
    the store)."""
    model: Annotated[WorldModelConfig, tyro.conf.OmitArgPrefixes] = field(default_factory=WorldModelConfig)
    loss: LossWeights = field(default_factory=LossWeights)
    size: tyro.conf.Suppress[str] = "paper"
    """Name of the preset these defaults came from (recorded in the run; set by --preset)."""
    reward_field: str = "reward_norm"
    """Reward the model predicts: reward_norm (what the agent was trained on, as the seed) or reward (raw)."""
    batch_size: int = 32
    """Windows per optimiser step (over all processes)."""
    total_updates: int = 100_000
    """Optimiser steps to train for."""
    time_limit: float = 0
    """Stop after this many seconds of training in this process, with a checkpoint, even before
    total_updates (0: no limit)."""
    curriculum: str = ""
    """Horizon curriculum, UPDATES:STEPS pairs (``2000:4,5000:8``): until update 2000 train on the first 4
    simulated steps of each window, until 5000 on 8, then on all of them. Short horizons first teach
    the one-step prediction sharply (errors that compound over 16 steps reward a blur); empty: all steps
    from the start."""
    learning_rate: float = 5e-4
    """Adam learning rate."""
    max_grad_norm: float = 100.0
    """Global gradient-norm clip."""
    window_stride: int = 1
    """Windows start every this many steps of an episode."""
    num_workers: int = 2
    """DataLoader worker processes reading windows (0: in the training process)."""
    seed: int = 0
    """Seed of the initial weights, the data order and the posterior samples."""
    name: str = "default"
    """Experiment name: runs go to RUN_ROOT/wm/GAME/NAME/SEED-TIMESTAMP."""
    run_root: Path = Path("runs")
    """Where run directories are created."""
    log_every: int = 10
    """Write a metrics row every this many updates."""
    checkpoint_every: int = 10_000
    """Save a checkpoint every this many updates (and always at the end)."""
    keep_checkpoints: int = 3
    """Keep only the newest N checkpoints (0 = all)."""
    video_every: int = 5000
    """Write a prediction video (true | teacher-forced | closed loop) every N updates (0: at the end only)."""
    video_samples: int = 4
    """Windows shown in each prediction video."""
    tensorboard: bool = True
    """Also write TensorBoard event files."""

    def validate(self, world: int = 1) -> None:
        for name in ("batch_size", "total_updates", "log_every", "checkpoint_every", "window_stride"):
            if getattr(self, name) < 1:
                raise ProclabError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.batch_size % world:
            raise ProclabError(f"batch_size={self.batch_size} must be a multiple of the {world} processes")
        if self.num_workers < 0 or self.video_samples < 0 or self.video_every < 0:
            raise ProclabError("num_workers, video_samples and video_every must be >= 0")
        self.horizon(0)  # a malformed --curriculum fails here, in one line
        if self.loss.shift and not self.model.camera_shift:
            raise ProclabError(
                f"--loss.shift {self.loss.shift} needs --camera-shift (a predicted shift to teach)"
            )
        if min(self.loss.shift, self.loss.open_loop, self.loss.policy_kl) < 0:
            raise ProclabError("--loss.shift, --loss.open-loop and --loss.policy-kl must be >= 0")
        if not 0 <= self.loss.kl_balance <= 1:
            raise ProclabError(f"kl_balance must be within [0, 1], got {self.loss.kl_balance}")

    def horizon(self, update: int) -> int:
        """Simulated steps trained on at update ``update`` (0-based), by :attr:`curriculum`."""
        for part in filter(None, self.curriculum.split(",")):
            until, sep, steps = part.partition(":")
            if not sep or not until.strip().isdigit() or not steps.strip().isdigit() or int(steps) < 1:
                raise ProclabError(f"--curriculum takes UPDATES:STEPS pairs like 2000:4,5000:8, got {part!r}")
            if update < int(until):
                return min(int(steps), self.model.num_sim_steps)
        return self.model.num_sim_steps


_TINY_MODEL = WorldModelConfig(
    num_init_steps=2,
    num_sim_steps=4,
    bottleneck=8,
    encoder_channels=(8, 8, 8, 16),
    encoder_rnn=16,
    env_converter=(16,),
    agent_converter=(16,),
    action_converter=(16,),
    deter=16,
    hidden=16,
    stoch=4,
    classes=4,
    embed_depth=4,
    decoder_depth=4,
    head_layers=1,
    head_hidden=16,
    **PRE_FIDELITY_MODEL,
)
_SMALL_MODEL = WorldModelConfig(
    num_init_steps=3,
    num_sim_steps=16,
    bottleneck=32,
    encoder_channels=(16, 16, 32, 32),
    encoder_rnn=128,
    env_converter=(256,),
    agent_converter=(64,),
    action_converter=(32,),
    deter=128,
    hidden=256,
    stoch=16,
    classes=16,
    embed_depth=16,
    decoder_depth=16,
    head_layers=2,
    head_hidden=128,
    **PRE_FIDELITY_MODEL,
)

# small's widths with the copy path: each frame copies the last one, moved by the camera's shift (carried on
# from the last move and changed by what the copied frame, the action and h say), where a per-pixel gate
# (biased to copy at the start) says so; the generator draws the rest. Chosen by the ablations of
# docs/worldmodel.md on the seed's CoinRun agent.
_CPU_MODEL = replace(
    _SMALL_MODEL, decoder_copy=True, camera_shift=12.0, camera_motion=True, copy_gate_bias=5.0
)

WM_SIZES: dict[str, WMTrainConfig] = {
    # interpreting-rl-behavior's Gen-2 model at HEAD (spec §4.1) with its cell, encoder blocks and
    # uniformity loss, batch 32 (the Dec-2021 README).
    "paper": WMTrainConfig(),
    # small and tiny are proclab's own sizes; they keep the cell and blocks proclab started with
    # (dreamer_gru, preact) and the uniformity loss without the diagonal constants.
    # Minutes on a laptop CPU: same structure, every width about 4x smaller, 16 simulated steps.
    "small": WMTrainConfig(
        model=_SMALL_MODEL,
        loss=LossWeights(**PRE_FIDELITY_LOSS),
        size="small",
        batch_size=16,
        learning_rate=1e-3,
        checkpoint_every=500,
        video_every=500,
    ),
    # Short-horizon fidelity per CPU-second (docs/worldmodel.md, "The cpu preset"): small plus the copy
    # path, the camera's motion taught by the measured shifts, the changed-pixel loss, the open-loop pass
    # and a horizon curriculum (4 steps, then 8, then 16); bf16 autocast where the CPU has it (--precision auto).
    "cpu": WMTrainConfig(
        model=_CPU_MODEL,
        loss=LossWeights(**PRE_FIDELITY_LOSS, changed_pixels=10.0, shift=10.0, open_loop=1.0),
        size="cpu",
        curriculum="3000:4,6000:8",
        batch_size=16,
        learning_rate=1e-3,
        checkpoint_every=500,
        video_every=500,
    ),
    # Seconds: for tests.
    "tiny": WMTrainConfig(
        model=_TINY_MODEL,
        loss=LossWeights(**PRE_FIDELITY_LOSS),
        size="tiny",
        batch_size=4,
        learning_rate=1e-3,
        num_workers=0,
        checkpoint_every=50,
        video_every=0,
        video_samples=2,
        log_every=1,
    ),
}


def wm_size(name: str) -> WMTrainConfig:
    """The training defaults of preset ``name``; a :class:`ProclabError` naming the valid ones otherwise."""
    if name not in WM_SIZES:
        raise unknown_choice("world-model preset", name, WM_SIZES)
    return WM_SIZES[name]


def saved_model_config(data: dict) -> WorldModelConfig:
    """A :class:`WorldModelConfig` read back from JSON; fields the save predates take their old values."""
    return from_dict(WorldModelConfig, {**PRE_FIDELITY_MODEL, **data})


def saved_train_config(data: dict) -> WMTrainConfig:
    """A :class:`WMTrainConfig` read back from a run's JSON, like :func:`saved_model_config`."""
    data = {
        **data,
        "model": {**PRE_FIDELITY_MODEL, **data.get("model", {})},
        "loss": {**PRE_FIDELITY_LOSS, **data.get("loss", {})},
    }
    return from_dict(WMTrainConfig, data)
