"""Agents shipped inside proclab: small agents every install can load without a download.

``proclab.load("coinrun/small")`` and ``proclab.load("maze/small")`` are proclab runs' last checkpoints
(weights and their configs: 1.4 MB for CoinRun, three checkpoints; 2.5 MB for Maze) in the package's ``data/agents/`` folder, trained and
checked by ``tools/notebook_agents.py``: the agents of the notebooks, the API example and the tests, so that
the documentation builds without training anything and every reader sees the same agent. They are small and
briefly trained; docs/benchmarks.md says how well each plays its held-out levels.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

BUNDLED = {"coinrun/small": "coinrun-small", "maze/small": "maze-small"}
"""Name -> folder under ``proclab/data/agents``."""


def bundled_path(name: str) -> Path:
    """The checkpoint folder of the shipped agent ``name`` (a key of :data:`BUNDLED`)."""
    return Path(str(resources.files("proclab"))) / "data" / "agents" / BUNDLED[name]


def source_path(source: str | Path) -> Path:
    """Where an agent named by ``source`` lies on disk: a shipped agent's folder when ``source`` is one of
    :data:`BUNDLED`' names, else ``source`` itself as a path (a run or checkpoint directory)."""
    return bundled_path(str(source)) if str(source) in BUNDLED else Path(source)
