"""What every ``proclab analyze`` command's arguments share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar

import tyro

from proclab.errors import ProclabError


@dataclass(frozen=True)
class AnalysisArgs:
    """Base of every analysis' arguments: the analysis folder and a seed."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}}
    """Named defaults: preset name -> field values (the dataclass defaults are ``paper``)."""

    out: Annotated[Path, tyro.conf.arg(metavar="ANALYSIS")]
    """The analysis folder (created; analysis.json records its inputs and every command run on it)."""
    seed: int = 0
    """Seed of subsampling, FastICA, NMF and t-SNE."""

    def require_positive(self, *names: str) -> None:
        """One-line error naming the first of these count fields that is below 1."""
        for name in names:
            if getattr(self, name) < 1:
                raise ProclabError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class MapArgs(AnalysisArgs):
    """Arguments of the analyses that draw 2-D maps (PCA, t-SNE) of many points."""

    perplexity: float = 30.0
    """t-SNE perplexity."""
    plot_points: int = 20_000
    """Points drawn in the scatter plots (a seeded subsample)."""
    plots: bool = True
    """Write the PNG plots (off: arrays and summary.json only)."""
