"""``proclab analyze bottleneck``: the world model's bottleneck vectors, informed vs random init."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar

import tyro

from proclab.interpret.args import AnalysisArgs


@dataclass(frozen=True)
class BottleneckArgs(AnalysisArgs):
    """Bottleneck vectors of informed vs random-init samples: PCA, Ward, t-SNE and an MMD test."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"clusters": 16, "permutations": 200}}

    samples: Annotated[Path | None, tyro.conf.arg(metavar="SAMPLES")] = None
    """Sample store with informed-init samples (default: the one the analysis folder was made with);
    random-init samples in it are used too."""
    random_samples: Annotated[Path | None, tyro.conf.arg(metavar="SAMPLES")] = None
    """A second sample store with random-init samples (proclab wm sample --init random)."""
    pcs: int = 128
    """Principal components of the standardised informed vectors (the random ones are projected on them)."""
    clusters: int = 100
    """Ward clusters (kNN connectivity) of the vectors."""
    perplexity: float = 30.0
    """t-SNE perplexity."""
    permutations: int = 1000
    """Permutations for the p-value of the informed-vs-random MMD test."""
    plots: bool = True
    """Write the PNG plots."""


def run_bottleneck(args: BottleneckArgs) -> Path:
    raise NotImplementedError("analyze bottleneck is being written")
