"""Published checkpoints: where to download them, and their training setting that the file does not hold.

A train-procgen-pytorch file records neither its game nor its levels nor whether backgrounds
were drawn, yet for a published agent these are facts of its paper. They are keyed here by the
file's SHA-256 (:data:`PUBLISHED`), so that importing the very file needs no flags; anything the
caller gives still wins. Each agent also has a short name (:data:`REGISTRY`) under which
``load`` downloads it on first use into proclab's cache (:func:`fetch`), checked by that hash.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from proclab.io.download import download
from proclab.io.files import user_cache


@dataclass(frozen=True)
class PublishedAgent:
    name: str
    """What ``load`` takes: ``GAME/where-it-was-published``."""
    url: str
    """A permanent address of the file: a URL pinned to a commit."""
    sha256: str
    size: int
    file_name: str
    game: str
    mode: str
    split: str
    use_backgrounds: bool
    where: str
    """The repository, commit and path it was published at."""


AGENTS = (
    PublishedAgent(
        name="coinrun/interpreting-rl-behavior",
        url="https://raw.githubusercontent.com/interpreting-rl-behavior/models--interpreting-rl-behavior/"
        "aac1b1d49031aa2db482d0d86c4ceffebc4afb9e/model_78053376.pth",
        sha256="5982094a6c5a08e31829089392dffe360d4998b29b1a0795505d15c293ad50e3",
        size=3_095_868,
        file_name="model_78053376.pth",
        game="coinrun",
        mode="hard",
        split="train-1m",
        use_backgrounds=False,
        where="interpreting-rl-behavior/models--interpreting-rl-behavior, commit aac1b1d, model_78053376.pth",
    ),
    PublishedAgent(
        name="maze/goal-misgeneralization",
        url="https://raw.githubusercontent.com/GarretteBaker/train-procgen-pytorch_devinterp/"
        "ee2ca6f6ecc420bd5a4a2e59c11e6467c73b5ea2/artifacts/model_160022528%3Av0/model_160022528.pth",
        sha256="e82e620ee1c47d82684bb3bc84e140ffd7bbb4ca8bd5f0cc517370abab9e3f00",
        size=2_518_378,
        file_name="model_160022528.pth",
        game="maze",
        mode="easy",
        split="all",
        use_backgrounds=True,
        where="GarretteBaker/train-procgen-pytorch_devinterp, commit ee2ca6f, "
        "artifacts/model_160022528:v0/model_160022528.pth (the maze variant with the cheese near the "
        "top-right corner)",
    ),
)
PUBLISHED: dict[str, PublishedAgent] = {agent.sha256: agent for agent in AGENTS}
REGISTRY: dict[str, PublishedAgent] = {agent.name: agent for agent in AGENTS}


def fetch(agent: PublishedAgent, cache_dir: str | Path | None = None) -> Path:
    """The agent's file in ``cache_dir/NAME/`` (default: ``agents`` in proclab's cache,
    ``io.files.user_cache``), downloaded there on first use and checked by its SHA-256."""
    folder = Path(cache_dir) if cache_dir is not None else user_cache("agents")
    return download(
        agent.url, agent.sha256, folder / agent.name / agent.file_name, f"agent {agent.name}", agent.size
    )
