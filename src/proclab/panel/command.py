"""``proclab panel export``'s command line: its arguments, parsed before anything heavy is imported.

The export itself (:mod:`proclab.panel.export`) reads activations with torch; keeping the arguments
here lets ``proclab panel export --help`` answer at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro


@dataclass(frozen=True)
class ExportArgs:
    """Export an analysis folder as a self-contained panel folder (open it with proclab panel serve). It
    computes nothing but a feed-forward agent's hook activations, replayed on the CPU in fp32 (the analyses'
    reader), so it takes no runtime flags."""

    analysis: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="ANALYSIS")]
    """The analysis folder (proclab analyze ... --out ANALYSIS); needs analyze hidden's basis."""
    out: Path
    """The panel folder to write (its data/ is replaced)."""
    samples: int = 1000
    """Simulated samples to include (the sample store's first N)."""
    real: int = 50
    """Real episodes to include (windows of the --real saliency run, else the store's first episodes)."""
    background: int = 3000
    """Real states drawn as the scatter's background cloud (a seeded random subset)."""
    eval: tuple[Path, ...] = ()
    """Eval result files (proclab eval --out FILE); default: eval*.json in the agent's run directory."""
    chunk: int = 500
    """Samples per chunk of the per-step arrays (the page fetches a chunk when it needs one)."""
    atlas_moments: int = 1
    """Per atlas card: its first N top and bottom moments get a window in the episode viewer (0: none)."""
    title: str | None = None
    """Page title (default: the analysis folder's name)."""
    seed: int = 0
    """Seed of the background subset."""


def main(argv: list[str], prog: str = "proclab panel export") -> None:
    args = tyro.cli(ExportArgs, args=argv, prog=prog)
    # lazy: command dispatch; the export needs torch, which --help must not pay for
    from proclab.panel.export import export

    out = export(args)
    print(f"panel written to {out}; open it with: proclab panel serve {out}")
