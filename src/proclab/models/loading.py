"""Trained networks put to use: an agent from its checkpoint, and freezing a network for analysis.

Everything downstream of training (evaluation, rendering, recording, the world model, T-REX
demos, interpretation) loads agents here, so a checkpoint is read and checked the same way
everywhere.
"""

from __future__ import annotations

from pathlib import Path

import torch

from proclab.envs import EnvConfig
from proclab.io.checkpoint import Checkpoint, load_checkpoint, load_weights_into
from proclab.io.configs import from_dict
from proclab.models.agent import Agent, build_agent
from proclab.models.config import AgentConfig
from proclab.run.runtime import Runtime


def freeze(module: torch.nn.Module) -> torch.nn.Module:
    """Eval mode and ``requires_grad=False`` on every weight; activations stay differentiable."""
    for p in module.parameters():
        p.requires_grad_(False)
    return module.eval()


def load_agent(path: str | Path | Checkpoint, runtime: Runtime) -> tuple[Agent, EnvConfig, Checkpoint]:
    """The agent of a checkpoint (or of a run directory's latest one, or of one already loaded), frozen,
    on the runtime's device."""
    ckpt = path if isinstance(path, Checkpoint) else load_checkpoint(path, kind="agent")
    agent = build_agent(from_dict(AgentConfig, ckpt.meta["agent"]))
    load_weights_into(agent, ckpt.weights, ckpt.path)
    return freeze(runtime.prepare(agent)), from_dict(EnvConfig, ckpt.meta["env"]), ckpt
