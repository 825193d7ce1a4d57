"""The arguments every ``proclab analyze`` command shares: the analysis folder, a seed and the runtime
group (``--device``, ``--precision``, ``--channels-last``, ``--torch-threads``) of every other command."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, ClassVar

import tyro

from proclab.errors import ProclabError
from proclab.run.runtime import RuntimeConfig

AGENT = Annotated[Path | None, tyro.conf.arg(metavar="AGENT")]
"""The type of an analysis' ``--agent``: a proclab run or checkpoint directory."""
WM = Annotated[Path | None, tyro.conf.arg(metavar="WM")]
"""The type of an analysis' ``--wm``: a world-model run or checkpoint directory."""
DATA = Annotated[Path | None, tyro.conf.arg(metavar="DATA")]
"""The type of an analysis' ``--data``: an episode store (proclab record)."""
SAMPLES = Annotated[Path | None, tyro.conf.arg(metavar="SAMPLES")]
"""The type of an analysis' ``--samples``: a sample store (proclab wm sample)."""


@dataclass(frozen=True)
class AnalysisArgs(RuntimeConfig):
    """Base of every analysis' arguments: the analysis folder, a seed and the runtime group.

    Each analysis redeclares ``seed`` with a docstring that says what the seed drives in it."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}}
    """Named defaults: preset name -> field values (the dataclass defaults are ``paper``)."""

    out: Annotated[Path, tyro.conf.arg(metavar="ANALYSIS")]
    """The analysis folder (created; analysis.json records its inputs and every command run on it)."""
    seed: int = 0
    """Seed of this analysis' random draws."""
    precision: str = field(default="auto", kw_only=True)
    """Arithmetic: fp32, bf16 or auto (bf16 where the hardware has it). This analysis runs nothing under
    autocast: it computes in fp32 whatever this says."""

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
