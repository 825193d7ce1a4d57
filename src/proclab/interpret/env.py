"""``proclab analyze env``: the world model's environment states ``env_h`` of a sample store."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar

import tyro

from proclab.interpret.args import AnalysisArgs


@dataclass(frozen=True)
class EnvArgs(AnalysisArgs):
    """Environment-state analysis of a sample store: PCA, Ward clusters and t-SNE of env_h."""

    PRESETS: ClassVar[dict[str, dict]] = {
        "paper": {},
        "small": {"pcs": 32, "clusters": 16, "fit_points": 5000, "plot_points": 5000},
    }

    samples: Annotated[Path | None, tyro.conf.arg(metavar="SAMPLES")] = None
    """Sample store (proclab wm sample; default: the one the analysis folder was made with)."""
    pcs: int = 128
    """Principal components kept of the standardised env states."""
    clusters: int = 128
    """Ward clusters (kNN connectivity) on the PCs that explain 95 % of the variance."""
    fit_points: int = 50_000
    """Ward and t-SNE are fitted on a seeded subsample of this many points; the rest are assigned."""
    perplexity: float = 30.0
    """t-SNE perplexity."""
    plot_points: int = 20_000
    """Points drawn in the scatter plots (a seeded subsample)."""
    plots: bool = True
    """Write the PNG plots."""


def run_env(args: EnvArgs) -> Path:
    raise NotImplementedError("analyze env is being written")
