"""What every ``proclab analyze`` command's arguments share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar

import tyro


@dataclass(frozen=True)
class AnalysisArgs:
    """Base of every analysis' arguments: the analysis folder and a seed."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}}
    """Named defaults: preset name -> field values (the dataclass defaults are ``paper``)."""

    out: Annotated[Path, tyro.conf.arg(metavar="ANALYSIS")]
    """The analysis folder (created; analysis.json records its inputs and every command run on it)."""
    seed: int = 0
    """Seed of subsampling, FastICA, NMF and t-SNE."""
