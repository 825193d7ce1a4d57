"""``proclab analyze hidden``: the agent's hidden states, their basis, clusters and maps."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar

import tyro

from proclab.interpret.args import AnalysisArgs


@dataclass(frozen=True)
class HiddenArgs(AnalysisArgs):
    """Hidden-state analysis: outliers, the PCA/ICA basis, Ward clusters, NMF, t-SNE and their plots."""

    PRESETS: ClassVar[dict[str, dict]] = {
        "paper": {},
        "small": {"episodes": 200, "clusters": 8, "nmf": 8, "fit_points": 5000, "plot_points": 5000},
    }

    data: Annotated[Path | None, tyro.conf.arg(metavar="DATA")] = None
    """Episode store of real episodes (default: the one the analysis folder was made with)."""
    samples: Annotated[Path | None, tyro.conf.arg(metavar="SAMPLES")] = None
    """Sample store of the world model (proclab wm sample); its states are drawn over the real cloud."""
    state: str | None = None
    """Recorded state to analyse: core.L.NAME (e.g. core.0.h), [state_in/|state_out/]core.L[.NAME]
    (default: the first recorded state tensor, leaving each step)."""
    hook: str | None = None
    """Analyse a hook point instead (e.g. torso.hook_fc), by replaying the agent on the stored frames."""
    checkpoint: Annotated[Path | None, tyro.conf.arg(metavar="CHECKPOINT")] = None
    """Agent to replay for --hook (default: the checkpoint that recorded the store)."""
    episodes: int = 4000
    """Real episodes to analyse (the store's first N; all if it has fewer)."""
    n_ics: int = 16
    """k: independent components, FastICA on the first k standardised PCs."""
    clusters: int = 32
    """Ward clusters (kNN connectivity) on the PCs that explain 95 % of the variance."""
    nmf: int = 16
    """NMF components of the min-shifted z-scored states."""
    outlier_k: int = 5
    """Neighbours for outlier removal: a point whose median distance to its k nearest is above
    mean + outlier_sigma * std of that distance is an outlier."""
    outlier_sigma: float = 2.0
    """Outlier threshold in standard deviations (see outlier_k)."""
    fit_points: int = 50_000
    """Outlier removal, basis, Ward, NMF and t-SNE are fitted on a seeded subsample of this many
    points; every other point is assigned (kNN distance, nearest centroid, openTSNE transform)."""
    perplexity: float = 30.0
    """t-SNE perplexity."""
    plot_points: int = 20_000
    """Points drawn in the scatter plots (a seeded subsample)."""
    plots: bool = True
    """Write the PNG plots (off: arrays and summary.json only)."""
    device: str = "auto"
    """Torch device for --hook replay."""


def run_hidden(args: HiddenArgs) -> Path:
    raise NotImplementedError("analyze hidden is being written")
