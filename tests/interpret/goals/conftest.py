import pytest

from proclab.envs import EnvConfig
from proclab.models import AgentConfig
from proclab.models.loading import load
from support import TINY_AGENT, agent_checkpoint


@pytest.fixture(scope="module")
def maze_agent_dir(tmp_path_factory):
    """A tiny random maze agent's run directory."""
    tmp = tmp_path_factory.mktemp("maze")
    return agent_checkpoint(
        tmp / "run", AgentConfig(core="none", **TINY_AGENT), EnvConfig(game=("maze",), num_envs=2)
    )


@pytest.fixture(scope="module")
def maze_agent(maze_agent_dir):
    return load(maze_agent_dir, device="cpu", precision="fp32")
