"""Load a trained agent (and the environment settings it was trained with) from a checkpoint."""

from __future__ import annotations

from pathlib import Path

import torch

from proclab.config import from_dict
from proclab.envs import EnvConfig
from proclab.io.checkpoint import Checkpoint, load_checkpoint, load_weights_into
from proclab.models import Agent, AgentConfig, build_agent
from proclab.rl.runtime import Runtime


def load_agent(path: str | Path | Checkpoint, runtime: Runtime) -> tuple[Agent, EnvConfig, Checkpoint]:
    """The agent of a checkpoint (or of a run directory's latest one, or of one already loaded), in eval mode,
    on the runtime's device."""
    ckpt = path if isinstance(path, Checkpoint) else load_checkpoint(path, kind="agent")
    agent = build_agent(from_dict(AgentConfig, ckpt.meta["agent"]))
    load_weights_into(agent, ckpt.weights, ckpt.path)
    agent = runtime.prepare(agent).eval()
    for p in agent.parameters():
        p.requires_grad_(False)
    return agent, from_dict(EnvConfig, ckpt.meta["env"]), ckpt


@torch.no_grad()
def agents_agree(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    """True if two modules hold identical parameters and buffers (used by resume tests)."""
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
