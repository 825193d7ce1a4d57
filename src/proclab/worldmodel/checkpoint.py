"""World-model checkpoints: self-contained, with the agent that was in the loop.

A world model is meaningless without the agent it simulates, and the agent's checkpoint may be
moved or deleted later. So a world-model checkpoint (a :mod:`proclab.io.checkpoint` directory,
written atomically) stores the agent too: the agent's weights sit in the same safetensors file
under the prefix ``agent.``, its configs in ``meta.json`` beside the world model's, and
``meta["agent_source"]`` records where it came from (path and step).

:class:`TrainedWorldModel` holds what a loaded checkpoint gives (the model, its agent, the checkpoint and
the runtime they compute on) as one object, the one the library's functions take (``dream``,
``evaluate_world_model``) and ``train_world_model`` returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from proclab.io.checkpoint import Checkpoint, load_checkpoint, load_weights_into, save_checkpoint
from proclab.io.configs import from_dict, to_dict
from proclab.models import Agent, AgentConfig, build_agent
from proclab.models.loading import freeze
from proclab.run.checkpoints import prune_checkpoints
from proclab.run.runtime import Runtime, make_runtime
from proclab.worldmodel.config import saved_model_config
from proclab.worldmodel.model import WorldModel

KIND = "world_model"
AGENT_PREFIX = "agent."


def save_world_model(
    path: Path, wm: WorldModel, agent: Agent, meta: dict, train_state: dict | None = None, keep: int = 0
) -> Path:
    """Write ``path`` (``.../checkpoints/step_<N>``); keep only the newest ``keep`` siblings (0 = all).

    ``meta`` must hold ``agent_env`` (the agent's environment config) and ``agent_source``.
    """
    weights = dict(wm.state_dict()) | {AGENT_PREFIX + k: v for k, v in agent.state_dict().items()}
    full = {
        "kind": KIND,
        "world_model": to_dict(wm.config),
        "num_actions": wm.num_actions,
        "agent": to_dict(agent.config),
        **meta,
    }
    out = save_checkpoint(path, weights, full, train_state)
    prune_checkpoints(path.parent, keep)
    return out


def load_world_model(
    path: str | Path, runtime: Runtime, train_state: bool = False
) -> tuple[WorldModel, Agent, Checkpoint]:
    """The world model and its frozen agent (eval mode, on the runtime's device) from a checkpoint/run dir."""
    ckpt = load_checkpoint(path, kind=KIND, train_state=train_state)
    agent = build_agent(from_dict(AgentConfig, ckpt.meta["agent"]))
    wm = WorldModel(
        saved_model_config(ckpt.meta["world_model"]), ckpt.meta["num_actions"], agent.state_shapes()
    )
    agent_weights = {
        k.removeprefix(AGENT_PREFIX): v for k, v in ckpt.weights.items() if k.startswith(AGENT_PREFIX)
    }
    load_weights_into(agent, agent_weights, ckpt.path)
    load_weights_into(
        wm, {k: v for k, v in ckpt.weights.items() if not k.startswith(AGENT_PREFIX)}, ckpt.path
    )
    return runtime.prepare(wm), freeze(runtime.prepare(agent)), ckpt


@dataclass(frozen=True)
class TrainedWorldModel:
    """A world model with the agent it simulates, its checkpoint and its runtime: what a notebook holds.

    The functions of the library take it (or a checkpoint or run directory, loaded with :meth:`load`), so
    that the agent in the loop, the reward the model predicts and the store it learned from are never
    passed separately and never mismatched.
    """

    model: WorldModel
    agent: Agent
    checkpoint: Checkpoint
    runtime: Runtime

    @classmethod
    def load(
        cls, path: str | Path, device: str = "auto", precision: str = "fp32", runtime: Runtime | None = None
    ) -> TrainedWorldModel:
        """The world model of a checkpoint or a run directory (its latest checkpoint), in eval mode, on
        ``runtime`` (a command's, from its runtime flags) or else on ``device`` in ``precision``: fp32 by
        default, as ``wm evaluate`` and ``wm sample`` compute, so that their numbers repeat here."""
        runtime = runtime or make_runtime(device, precision)
        wm, agent, ckpt = load_world_model(path, runtime)
        return cls(wm.eval(), agent, ckpt, runtime)

    @property
    def path(self) -> Path:
        """The checkpoint directory."""
        return self.checkpoint.path

    @property
    def run_dir(self) -> Path:
        """The training run's directory (config, metrics, checkpoints): the checkpoint's grandparent."""
        return self.checkpoint.path.parents[1]

    @property
    def updates(self) -> int:
        """Optimiser steps the model was trained for."""
        return self.checkpoint.step

    @property
    def reward_field(self) -> str:
        """The reward the model predicts: ``reward_norm`` (what the agent was trained on) or ``reward``."""
        return self.checkpoint.meta["reward_field"]

    @property
    def data(self) -> Path:
        """The episode store the model was trained on."""
        return Path(self.checkpoint.meta["data"])

    def __repr__(self) -> str:
        return f"TrainedWorldModel({str(self.path)!r}, {self.updates} updates, {self.runtime.device})"


def as_trained(world_model: TrainedWorldModel | str | Path) -> TrainedWorldModel:
    """``world_model`` itself, or the one a checkpoint or run directory holds (fp32 on the default device)."""
    if isinstance(world_model, TrainedWorldModel):
        return world_model
    return TrainedWorldModel.load(world_model)
