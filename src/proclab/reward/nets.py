"""Reward networks r(s): one RGB frame in, one scalar out, and how they are saved and loaded.

T-REX scores a clip by summing a per-frame reward, so a reward net sees single frames (no
frame stack, no action). Three architectures:

* ``seed``: the procedural-generalization CNN (about 267k parameters): three 3x3 convs with
  max-pooling and leaky ReLUs, FC 64, FC 1.
* ``atari``: the T-REX Atari net (convs 16@7s3, 16@5s2, 16@3s1, 16@3s1, FC 64, FC 1, leaky ReLUs)
  on 3 RGB channels instead of 4 stacked grey frames.
* ``impala``: proclab's IMPALA torso (the agents' image encoder) and a linear head.

Frames arrive as uint8 ``(N, 3, 64, 64)``. By default they are divided by 255; ``scale_input=False``
keeps the seed's raw 0..255 values. A trained net is a checkpoint of kind ``reward_model``
(safetensors weights, its config and training summary in ``meta.json``); :class:`RewardModel` is such a
checkpoint loaded, the object the library's functions take (``evaluate_trex``) and ``train_trex`` returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from proclab.errors import ProclabError, unknown_choice
from proclab.io.checkpoint import Checkpoint, load_checkpoint, load_weights_into, save_checkpoint
from proclab.io.configs import from_dict, to_dict
from proclab.models.loading import freeze
from proclab.models.torso import ImpalaTorso
from proclab.run.runtime import Runtime, make_runtime

ARCHS = ("seed", "atari", "impala")
KIND = "reward_model"


@dataclass(frozen=True)
class RewardNetConfig:
    """A per-frame reward network."""

    arch: str = "seed"
    """Architecture: seed (the procedural-generalization CNN), atari (T-REX Atari net, RGB), impala."""
    scale_input: bool = True
    """Divide pixels by 255 (the seed fed raw 0..255 values: --no-scale-input reproduces that)."""

    def __post_init__(self):
        if self.arch not in ARCHS:
            raise unknown_choice("reward net", self.arch, ARCHS)


def _seed_cnn() -> nn.Sequential:
    act = nn.LeakyReLU(0.01)
    return nn.Sequential(
        nn.Conv2d(3, 32, 3),
        nn.MaxPool2d(4, 2),
        act,  # 32x30x30
        nn.Conv2d(32, 32, 3),
        nn.MaxPool2d(4, 2),
        act,  # 32x13x13
        nn.Conv2d(32, 32, 3),
        act,  # 32x11x11
        nn.Flatten(),
        nn.Linear(32 * 11 * 11, 64),
        act,
        nn.Linear(64, 1),
    )


def _atari_cnn() -> nn.Sequential:
    act = nn.LeakyReLU(0.01)
    return nn.Sequential(
        nn.Conv2d(3, 16, 7, stride=3),
        act,  # 16x20x20
        nn.Conv2d(16, 16, 5, stride=2),
        act,  # 16x8x8
        nn.Conv2d(16, 16, 3),
        act,  # 16x6x6
        nn.Conv2d(16, 16, 3),
        act,  # 16x4x4
        nn.Flatten(),
        nn.Linear(16 * 4 * 4, 64),
        act,
        nn.Linear(64, 1),
    )


def _impala() -> nn.Sequential:
    return nn.Sequential(ImpalaTorso((16, 32, 32), 256), nn.Linear(256, 1))


class RewardNet(nn.Module):
    """uint8 frames ``(N, 3, 64, 64)`` -> rewards ``(N,)``."""

    def __init__(self, config: RewardNetConfig):
        super().__init__()
        self.config = config
        self.net = {"seed": _seed_cnn, "atari": _atari_cnn, "impala": _impala}[config.arch]()

    def forward(self, frames: Tensor) -> Tensor:
        x = frames.to(dtype=torch.float32, memory_format=torch.channels_last)
        if self.config.scale_input:
            x = x / 255
        return self.net(x).squeeze(-1)


def save_reward_model(path: str | Path, net: RewardNet, meta: dict) -> Path:
    """Write ``net`` as a ``reward_model`` checkpoint; ``meta`` adds the training summary."""
    return save_checkpoint(path, net.state_dict(), {"kind": KIND, "net": to_dict(net.config), **meta})


def load_reward_model(path: str | Path, device: torch.device | str = "cpu") -> tuple[RewardNet, Checkpoint]:
    """A trained reward net (eval mode, no gradients) from a checkpoint or a ``trex train`` run directory."""
    ckpt = load_checkpoint(path, kind=KIND)
    if "net" not in ckpt.meta:
        raise ProclabError(f"reward model {str(ckpt.path)!r} has no network config in its meta.json")
    net = RewardNet(from_dict(RewardNetConfig, ckpt.meta["net"]))
    load_weights_into(net, ckpt.weights, ckpt.path)
    return freeze(net.to(device, memory_format=torch.channels_last)), ckpt


@torch.inference_mode()
def predict_rewards(net: RewardNet, frames, runtime: Runtime, chunk: int = 1024) -> np.ndarray:
    """r(s) of uint8 frames ``(T, 3, 64, 64)`` (NumPy or torch), ``chunk`` at a time on ``runtime`` (``net``
    prepared on it), as a NumPy array."""
    frames = torch.as_tensor(frames)
    with runtime.autocast():
        return torch.cat([net(c.to(runtime.device)).float().cpu() for c in frames.split(chunk)]).numpy()


@dataclass(frozen=True)
class RewardModel:
    """A learned reward r(s) with its checkpoint and the runtime it computes on: the net, and the training
    summary (the ``trex train`` summary row: correlations on held-out levels, pair accuracies, the length
    control)."""

    net: RewardNet
    checkpoint: Checkpoint = field(repr=False)
    runtime: Runtime = field(repr=False)

    @classmethod
    def load(
        cls, path: str | Path, device: str = "auto", precision: str = "auto", runtime: Runtime | None = None
    ) -> RewardModel:
        """The reward model of a ``trex train`` run directory or a reward-model checkpoint, on ``runtime`` (a
        command's) or else on ``device`` in ``precision``: the defaults of ``trex evaluate``'s runtime flags,
        so that its numbers repeat here."""
        runtime = runtime or make_runtime(device, precision)
        net, ckpt = load_reward_model(path)
        return cls(runtime.prepare(net), ckpt, runtime)

    @property
    def path(self) -> Path:
        """The checkpoint directory."""
        return self.checkpoint.path

    @property
    def summary(self) -> dict:
        """The training run's summary row (``rm_infos.csv``'s columns), as the run saved it."""
        return self.checkpoint.meta.get("summary", {})

    @property
    def game(self) -> str | None:
        return self.checkpoint.meta.get("game")

    def rewards(self, frames: np.ndarray | Tensor) -> np.ndarray:
        """r(s) of uint8 frames ``(T, 3, 64, 64)``, one per frame."""
        return predict_rewards(self.net, frames, self.runtime)

    def __repr__(self) -> str:
        return f"RewardModel({str(self.path)!r}, {self.net.config.arch} net, game {self.game})"


def as_reward_model(reward_model: RewardModel | str | Path) -> RewardModel:
    """``reward_model`` itself, or the one a ``trex train`` run or checkpoint directory holds."""
    return reward_model if isinstance(reward_model, RewardModel) else RewardModel.load(reward_model)
