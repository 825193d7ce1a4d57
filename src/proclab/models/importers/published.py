"""Published checkpoints whose training setting is known but not written in the file.

A train-procgen-pytorch file records neither its game nor its levels nor whether backgrounds
were drawn, yet for a published agent these are facts of its paper. They are keyed here by the
file's SHA-256, so that importing the very file needs no flags; anything given on the command
line still wins.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PublishedAgent:
    name: str
    game: str
    mode: str
    split: str
    use_backgrounds: bool
    where: str


PUBLISHED: dict[str, PublishedAgent] = {
    "5982094a6c5a08e31829089392dffe360d4998b29b1a0795505d15c293ad50e3": PublishedAgent(
        name="interpreting-rl-behavior's CoinRun agent (model_78053376.pth)",
        game="coinrun",
        mode="hard",
        split="train-1m",
        use_backgrounds=False,
        where="interpreting-rl-behavior/models--interpreting-rl-behavior, commit aac1b1d",
    ),
}
